// Certificates for etcd over mutual TLS (docs/security.md), made with
// Debian's `openssl` command: a CA, etcd's server certificate for `names`
// (host names and IP addresses clients dial), and one client certificate
// for pikv's controllers, nodes, engines and CLI. In `dir`:
//   ca.crt ca.key          the CA (ca.key signs; keep it off the hosts)
//   server.crt server.key  etcd's (--cert-file, --key-file; its gateway
//                          dials etcd with it, so it is a client's too)
//   client.crt client.key  pikv's (etcd-tls: DIR, etcd://...?tls=DIR)
// Files already there are kept, so re-running it changes nothing.
#pragma once

#include <string>
#include <vector>

#include "pikv/common/status.h"

namespace pikv::launch {

Status WriteEtcdCerts(const std::string& dir, const std::vector<std::string>& names);

}  // namespace pikv::launch
