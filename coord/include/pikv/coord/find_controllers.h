// FindControllers: a controller spec to the finder that follows it
// (transport/controller_finder.h), etcd specs included:
//   etcd://h1:2379,h2:2379[/cluster][?tls=DIR]
// names the leader as etcd does (cluster default "pikv"), read over mutual
// TLS with the certificates in DIR (ca.crt, client.crt, client.key) when
// given. Any other spec is ControllerFinder::Parse's. A program that takes
// etcd specs passes this where a FindControllersFn is asked for.
#pragma once

#include <memory>
#include <string>

#include "pikv/common/status.h"
#include "pikv/transport/controller_finder.h"

namespace pikv::coord {

Result<std::shared_ptr<ControllerFinder>> FindControllers(const std::string& spec);

}  // namespace pikv::coord
