// LeaderElection: one controller of many leads, by an etcd lease.
//
// Every controller keeps one lease of `ttl` alive (renewed every ttl/3) and
// announces itself under pikv/<cluster>/controllers/<endpoint>. The leader is
// whoever created pikv/<cluster>/leader, bound to its lease; its value names
// the leader's endpoints and epoch, and the epoch is the key's create
// revision, which etcd makes unique and increasing. Standbys read the key
// every poll (ttl/20, 50-250 ms) and campaign when it is gone.
//
// No split brain: a leader counts its lease from the moment it sent the last
// renewal that succeeded, and stops acting as leader (LeaderEpoch() turns 0)
// a guard (ttl/10, at least 100 ms) before that lease could expire in etcd,
// which is the earliest another controller can win. A process that was
// stopped (SIGSTOP) or cut off finds its time gone when it runs again. A
// renewal that comes late (etcd electing its own leader) only pauses
// leading: the key stayed bound to the lease, so nobody else led meanwhile,
// and the same epoch resumes. Stop() revokes the lease: a graceful leader
// hands over at once.
// Thread-safety: LeaderEpoch and View from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pikv/common/status.h"
#include "pikv/coord/leader_key.h"

namespace pikv::controller {

using coord::ControllerInfo;

using Clock = std::chrono::steady_clock;

struct ElectionOptions {
  coord::EtcdAccess etcd;
  std::string cluster = "pikv";         // [A-Za-z0-9_.-], at most 64
  std::chrono::milliseconds ttl{3000};  // whole seconds, 2-60 (etcd leases count seconds)
  std::string endpoint;                 // this controller's endpoint, as others dial it
  std::string http;                     // its HTTP address (may be empty)
};

struct ElectionView {
  bool leader = false;                      // this controller leads now
  int64_t epoch = 0;                        // its epoch while it leads
  ControllerInfo current;                   // the leader as last read (empty endpoint: none)
  std::vector<ControllerInfo> members;      // controllers with a live lease, this one included
  bool etcd_reachable = false;              // the last call to etcd was answered
  std::chrono::milliseconds lease_left{0};  // until this controller stops leading
  double last_failover_seconds = 0;         // last win: since the previous leader was last seen
};

class LeaderElection {
 public:
  static Result<std::unique_ptr<LeaderElection>> Start(ElectionOptions options);
  ~LeaderElection();  // Stop()
  LeaderElection(const LeaderElection&) = delete;
  LeaderElection& operator=(const LeaderElection&) = delete;

  // This controller's epoch while it may act as leader, else 0.
  int64_t LeaderEpoch(Clock::time_point now) const;
  ElectionView View(Clock::time_point now) const;
  const ElectionOptions& options() const { return options_; }
  void Stop();

 private:
  struct Impl;
  class Campaign;
  explicit LeaderElection(ElectionOptions options);
  void Run();  // the thread's body: Campaign, defined beside it

  const ElectionOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pikv::controller
