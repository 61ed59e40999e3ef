#include "pikv/controller/trust_record.h"

#include <spdlog/spdlog.h>

#include <charconv>

#include "pikv/coord/leader_key.h"
#include "pikv/proto/owner.h"

namespace pikv::controller {

TrustRecord::TrustRecord(coord::EtcdClient etcd, std::string cluster)
    : etcd_(std::move(etcd)), cluster_(std::move(cluster)) {}

Result<TrustRecord::Loaded> TrustRecord::Load() {
  Loaded out;
  const std::string revoked = coord::RevokedPrefix(cluster_);
  auto names = etcd_.List(revoked, kMaxEntries);
  if (!names.ok()) return names.status();
  for (const coord::EtcdKv& kv : *names) {
    const std::string name = kv.key.substr(revoked.size());
    if (!IsIdentityName(name)) {
      spdlog::warn("controller: etcd key {} names no engine: skipped", kv.key);
      continue;
    }
    out.revoked.push_back(name);
  }
  const std::string confirmed = coord::ConfirmedPrefix(cluster_);
  auto counts = etcd_.List(confirmed, kMaxEntries);
  if (!counts.ok()) return counts.status();
  for (const coord::EtcdKv& kv : *counts) {
    const std::string writer = kv.key.substr(confirmed.size());
    uint64_t n = 0;
    const char* end = kv.value.data() + kv.value.size();
    if (!IsIdentityName(writer) || std::from_chars(kv.value.data(), end, n).ptr != end) {
      spdlog::warn("controller: etcd key {} is not a writer's count: skipped", kv.key);
      continue;
    }
    out.confirmed[writer] = n;
  }
  return out;
}

Status TrustRecord::Revoke(const std::string& engine) {
  if (!IsIdentityName(engine)) return InvalidArgument("revoke names an engine");
  return etcd_.Put(coord::RevokedPrefix(cluster_) + engine, "1", 0);
}

Status TrustRecord::Confirmed(const std::string& writer, uint64_t count) {
  if (!IsIdentityName(writer)) return InvalidArgument("not a writer's name: " + writer);
  return etcd_.Put(coord::ConfirmedPrefix(cluster_) + writer, std::to_string(count), 0);
}

}  // namespace pikv::controller
