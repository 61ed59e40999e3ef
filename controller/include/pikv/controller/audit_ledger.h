// AuditLedger: engines' audit-mismatch reports, taken as evidence, not as
// verdicts.
//
// A report names a key, the payload checksum of the object the engine
// fetched (which object it judged) and its writer. A report of a key the
// registry holds drops it cluster-wide at once (it costs a recompute); the
// writer is counted as a poisoner only when a second, different reporter
// reports the same object (key, checksum and writer), within the first
// report's tenant, even after the key was dropped: one hostile or broken
// engine cannot get honest writers counted, nor choose whom a second
// report counts. Each reporter may file kBurst reports at once and
// kPerMinute more per minute after (a token bucket); reports past that are
// refused (the key stays) and counted against the reporter. Every table is
// bounded: names past kMaxNames are counted as "other" (reporters whose
// bucket is full again are forgotten to make room), objects past
// kMaxPending forget the oldest.
// Thread-safety: all methods are safe to call concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <tuple>

#include "pikv/common/mutex.h"
#include "pikv/proto/chunk_key.h"

namespace pikv::controller {

struct AuditStats {
  uint64_t reports = 0;    // taken: their keys dropped
  uint64_t refused = 0;    // over a reporter's rate: nothing dropped
  uint64_t confirmed = 0;  // objects reported by two different reporters
  std::map<std::string, uint64_t> confirmed_by_writer;  // writers of those objects
  std::map<std::string, uint64_t> reports_by_reporter;  // taken, by who filed them
  std::map<std::string, uint64_t> refused_by_reporter;
};

class AuditLedger {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr double kBurst = 16;
  static constexpr double kPerMinute = 16;
  static constexpr size_t kMaxPending = 4096;
  static constexpr size_t kMaxNames = 1024;

  enum class Verdict {
    kRefused,    // over the reporter's rate: do not drop
    kIgnored,    // a key not held, and no earlier report to confirm
    kDropped,    // evidence: drop the key
    kConfirmed,  // a second reporter's evidence: drop it, its writer counted
  };
  struct Report {
    std::string reporter;  // an engine's name (or a trusted connection's)
    bool trusted = false;  // a trusted connection: any tenant
    std::string tenant;    // held: the object's; not held: the reporter's
    bool held = true;      // the registry holds the key
    ChunkKey key;
    uint64_t checksum = 0;  // 0: unknown (dropped, never confirmed)
    std::string writer;
  };
  Verdict Take(const Report& report, Clock::time_point now);

  AuditStats Stats() const;
  void Clear();
  // Confirmed counts as a previous leader recorded them (TrustRecord).
  void RestoreConfirmed(const std::map<std::string, uint64_t>& by_writer);

 private:
  struct Bucket {
    double tokens = kBurst;
    Clock::time_point at;
  };
  struct Object {
    std::string tenant, first_reporter;
    bool confirmed = false;
  };
  using ObjectId = std::tuple<ChunkKey, uint64_t, std::string>;  // key, checksum, writer
  // Names past kMaxNames distinct ones count as "other".
  static void Count(std::map<std::string, uint64_t>& by_name, const std::string& name);
  bool Allow(const std::string& reporter, Clock::time_point now) PIKV_REQUIRES(mu_);

  mutable Mutex mu_;
  std::map<std::string, Bucket> buckets_ PIKV_GUARDED_BY(mu_);
  std::map<ObjectId, Object> objects_ PIKV_GUARDED_BY(mu_);
  std::deque<ObjectId> order_ PIKV_GUARDED_BY(mu_);  // oldest first
  AuditStats stats_ PIKV_GUARDED_BY(mu_);
};

}  // namespace pikv::controller
