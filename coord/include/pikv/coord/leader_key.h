// What etcd holds for a pikv cluster, and nothing else: who leads, which
// controllers are up (docs/operations.md), and what trust depends on
// (docs/security.md). Keys, by cluster name:
//   pikv/<cluster>/leader                  the leader's endpoints; bound to its
//                                          lease; epoch = its create revision
//   pikv/<cluster>/controllers/<endpoint>  each controller, bound to its lease
//   pikv/<cluster>/revoked/<engine>        a revoked engine (controller/trust_record.h)
//   pikv/<cluster>/confirmed/<writer>      objects of a writer two engines' audits
//                                          found wrong: a decimal count
// Values are JSON: {"endpoint": ..., "http": ..., "epoch": ...}.
#pragma once

#include <cstdint>
#include <string>

#include "pikv/common/status.h"
#include "pikv/coord/etcd_client.h"

namespace pikv::coord {

struct ControllerInfo {
  std::string endpoint;
  std::string http;
  int64_t epoch = 0;  // the leader's: its key's create revision; 0 for members
};

std::string LeaderKey(const std::string& cluster);
std::string MembersPrefix(const std::string& cluster);
std::string RevokedPrefix(const std::string& cluster);
std::string ConfirmedPrefix(const std::string& cluster);
Status CheckClusterName(const std::string& cluster);

std::string ControllerValue(const ControllerInfo& info);
// A member key's value, checked (endpoint present, bounded).
Result<ControllerInfo> ControllerFromValue(const std::string& value);
// The leader key as read: its value's endpoints, its create revision as epoch.
Result<ControllerInfo> LeaderFromKv(const EtcdKv& kv);

}  // namespace pikv::coord
