// TrustRecord: what trust depends on, kept in etcd beside the leader's key
// so that every new leader reads it (coord/leader_key.h): the revoked
// engines, and the writers whose objects two engines' audits found wrong
// (AuditLedger's confirmed counts). The leader writes a revocation before
// it takes effect; a new leadership reads the record before it answers.
// What etcd sends back is checked: names must be identity names, counts
// decimal; anything else is skipped and logged.
// Not thread-safe (one EtcdClient): the controller's serving thread only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pikv/common/status.h"
#include "pikv/coord/etcd_client.h"

namespace pikv::controller {

class TrustRecord {
 public:
  TrustRecord(coord::EtcdClient etcd, std::string cluster);

  struct Loaded {
    std::vector<std::string> revoked;
    std::map<std::string, uint64_t> confirmed;  // by writer
  };
  Result<Loaded> Load();
  Status Revoke(const std::string& engine);
  Status Confirmed(const std::string& writer, uint64_t count);

  // At most this many of each are read back (a register reply names at
  // most kMaxRevokedInRegisterReply revocations anyway).
  static constexpr int64_t kMaxEntries = 4096;

 private:
  coord::EtcdClient etcd_;
  const std::string cluster_;
};

}  // namespace pikv::controller
