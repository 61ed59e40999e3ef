#include "pikv/controller/audit_ledger.h"

#include <algorithm>

namespace pikv::controller {

void AuditLedger::Count(std::map<std::string, uint64_t>& by_name, const std::string& name) {
  const bool room = by_name.size() < kMaxNames || by_name.contains(name);
  by_name[room ? name : "other"]++;
}

bool AuditLedger::Allow(const std::string& reporter, Clock::time_point now) {
  auto refill = [&](Bucket& b) {
    const double minutes = std::chrono::duration<double, std::ratio<60>>(now - b.at).count();
    b.tokens = std::min(kBurst, b.tokens + std::max(0.0, minutes) * kPerMinute);
    b.at = now;
  };
  auto it = buckets_.find(reporter);
  if (it == buckets_.end()) {
    if (buckets_.size() >= kMaxNames) {
      // Reporters whose bucket is full again are as good as new: forgotten.
      for (auto b = buckets_.begin(); b != buckets_.end();) {
        refill(b->second);
        b = b->second.tokens >= kBurst ? buckets_.erase(b) : std::next(b);
      }
    }
    if (buckets_.size() >= kMaxNames) return false;
    it = buckets_.emplace(reporter, Bucket{kBurst, now}).first;
  }
  Bucket& b = it->second;
  refill(b);
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

AuditLedger::Verdict AuditLedger::Take(const Report& r, Clock::time_point now) {
  MutexLock lock(mu_);
  if (!Allow(r.reporter, now)) {
    stats_.refused++;
    Count(stats_.refused_by_reporter, r.reporter);
    return Verdict::kRefused;
  }
  const ObjectId id{r.key, r.checksum, r.writer};
  auto it = r.checksum == 0 ? objects_.end() : objects_.find(id);
  if (!r.held && it == objects_.end()) return Verdict::kIgnored;
  // Another tenant's engine names a key it cannot see: no evidence.
  if (it != objects_.end() && !r.trusted && it->second.tenant != r.tenant) return Verdict::kIgnored;
  stats_.reports++;
  Count(stats_.reports_by_reporter, r.reporter);
  if (r.checksum == 0) return Verdict::kDropped;  // which object it judged is unknown
  if (it == objects_.end()) {
    if (order_.size() >= kMaxPending) {
      objects_.erase(order_.front());
      order_.pop_front();
    }
    objects_.emplace(id, Object{r.tenant, r.reporter, false});
    order_.push_back(id);
    return Verdict::kDropped;
  }
  Object& o = it->second;
  if (o.confirmed || o.first_reporter == r.reporter) return Verdict::kDropped;
  o.confirmed = true;
  stats_.confirmed++;
  Count(stats_.confirmed_by_writer, r.writer);
  return Verdict::kConfirmed;
}

AuditStats AuditLedger::Stats() const {
  MutexLock lock(mu_);
  return stats_;
}

void AuditLedger::RestoreConfirmed(const std::map<std::string, uint64_t>& by_writer) {
  MutexLock lock(mu_);
  for (const auto& [writer, n] : by_writer) {
    uint64_t& held = stats_.confirmed_by_writer[writer];
    if (n > held) stats_.confirmed += n - held, held = n;
  }
}

void AuditLedger::Clear() {
  MutexLock lock(mu_);
  buckets_.clear();
  objects_.clear();
  order_.clear();
  stats_ = {};
}

}  // namespace pikv::controller
