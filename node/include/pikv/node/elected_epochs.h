// ElectedEpochs: which controller leadership a node may follow. An elected
// leader's messages carry its epoch and lease TTL (proto/control_wire.h's
// ControllerEpoch). One older than an epoch already adopted is a
// deposed leader's and is ignored, so it cannot command the node; unless
// etcd's history was rewound (wiped, or restored from a snapshot): a
// controller that keeps claiming the same lower epoch, without a break, for
// two of its lease TTLs is no deposed leader (one stops within its lease),
// and a register reply from it is adopted. Not thread-safe: the reporter's
// thread owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "pikv/proto/message.h"

namespace pikv::node {

class ElectedEpochs {
 public:
  using Clock = std::chrono::steady_clock;
  // The lease TTLs a controller may say (coord/leader_election.h); one that
  // says less is never followed to a lower epoch.
  static constexpr int64_t kMinLeaseMs = 2000, kMaxLeaseMs = 60'000;

  // Whether `h`, from the controller at `endpoint`, speaks for a leadership
  // this node may follow. `adopting` (a register reply): its epoch becomes
  // the newest seen. A message of no elected leader (a lone controller) is
  // always current.
  bool Current(const Header& h, const std::string& endpoint, bool adopting, Clock::time_point now);
  int64_t newest() const { return newest_; }

 private:
  // Whether `endpoint` has claimed `epoch` (lower than the newest) without
  // a break for two of its leases, by now.
  bool Rewound(const std::string& endpoint, int64_t epoch, int64_t ttl_ms, Clock::time_point now);

  int64_t newest_ = 0;  // the newest elected epoch adopted
  struct LowerClaim {
    std::string endpoint;
    int64_t epoch = 0;
    Clock::time_point since, last;
  };
  std::optional<LowerClaim> lower_claim_;  // the first refused register reply of a lower epoch
};

}  // namespace pikv::node
