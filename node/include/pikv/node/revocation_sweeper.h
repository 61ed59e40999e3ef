// RevocationSweeper: drops a revoked engine's objects, once per engine, on
// a thread of its own. A sweep walks every tier (Redis: a SCAN of the
// namespace reading each object's first bytes), so it must not run on the
// reporter's thread, whose heartbeats it would stall; and a register reply
// naming revocations already swept must not start it again. The shared
// tier (Redis) is swept only when asked: the controller names one node per
// revocation, not every node.
// Thread-safety: Request may be called from any thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace pikv::node {

class RevocationSweeper {
 public:
  // Drops `engine`'s objects from this node's tiers, and from the shared
  // tier when `shared_tier`; false when it could not finish (Redis could not
  // be searched): a later request of it sweeps again. Runs on the sweeper's
  // thread.
  using Sweep = std::function<bool(const std::string& engine, bool shared_tier)>;
  explicit RevocationSweeper(Sweep sweep);
  ~RevocationSweeper();  // ends after the sweep under way; queued ones are dropped
  RevocationSweeper(const RevocationSweeper&) = delete;
  RevocationSweeper& operator=(const RevocationSweeper&) = delete;

  // Queues a sweep of `engine` unless one was queued before and did not
  // fail (for the remote tier: one with it). Whether one was queued.
  bool Request(const std::string& engine, bool shared_tier);
  // Until every queued sweep has run (tests).
  void WaitIdle();

 private:
  void Run();

  const Sweep sweep_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::string, bool>> queue_;
  std::set<std::string> local_, shared_;  // engines swept here; and in the remote tier
  bool busy_ = false, stop_ = false;
  std::thread thread_;  // last: starts after the rest is built
};

}  // namespace pikv::node
