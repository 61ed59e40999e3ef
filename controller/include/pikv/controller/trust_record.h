// TrustRecord: what trust depends on, kept outside the controller's memory
// so that a new leader, or a restarted lone controller, reads it before it
// answers: the revoked engines, and the writers whose objects two engines'
// audits found wrong (AuditLedger's confirmed counts). The controller
// writes a revocation before it takes effect.
//   EtcdTrustRecord  beside the leader's key (coord/leader_key.h), for
//                    controllers with standbys;
//   FileTrustRecord  one JSON file, replaced atomically on each change, for
//                    a controller without etcd (`trust-file`).
// What is read back is checked: names must be identity names, counts
// decimal; anything else is skipped and logged.
// Not thread-safe: the controller's serving thread only.
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
  struct Loaded {
    std::vector<std::string> revoked;
    std::map<std::string, uint64_t> confirmed;  // by writer
  };
  virtual ~TrustRecord() = default;
  virtual Result<Loaded> Load() = 0;
  virtual Status Revoke(const std::string& engine) = 0;
  virtual Status Confirmed(const std::string& writer, uint64_t count) = 0;
  // Where it is kept, for log lines.
  virtual std::string where() const = 0;

  // At most this many of each are read back (a register reply names at
  // most kMaxRevokedInRegisterReply revocations anyway).
  static constexpr int64_t kMaxEntries = 4096;
};

class EtcdTrustRecord final : public TrustRecord {
 public:
  EtcdTrustRecord(coord::EtcdClient etcd, std::string cluster);
  Result<Loaded> Load() override;
  Status Revoke(const std::string& engine) override;
  Status Confirmed(const std::string& writer, uint64_t count) override;
  std::string where() const override { return "etcd"; }

 private:
  coord::EtcdClient etcd_;
  const std::string cluster_;
};

// {"revoked": ["engine", ...], "confirmed": {"writer": count, ...}}: a
// missing file is an empty record (the first start); each change writes the
// whole record to <path>.tmp, syncs it and renames it over <path>, so a
// crash leaves the old record or the new one, never half of one. Bounded by
// the file's size (1 MiB), not by kMaxEntries: nothing read is dropped.
class FileTrustRecord final : public TrustRecord {
 public:
  explicit FileTrustRecord(std::string path) : path_(std::move(path)) {}
  Result<Loaded> Load() override;
  Status Revoke(const std::string& engine) override;
  Status Confirmed(const std::string& writer, uint64_t count) override;
  std::string where() const override { return path_; }

 private:
  Status Write(const Loaded& record);
  const std::string path_;
  Loaded current_;  // what the file holds
};

}  // namespace pikv::controller
