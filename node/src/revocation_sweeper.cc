#include "pikv/node/revocation_sweeper.h"

#include <spdlog/spdlog.h>

namespace pikv::node {

RevocationSweeper::RevocationSweeper(Sweep sweep)
    : sweep_(std::move(sweep)), thread_([this] { Run(); }) {}

RevocationSweeper::~RevocationSweeper() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool RevocationSweeper::Request(const std::string& engine, bool shared_tier) {
  {
    std::lock_guard lock(mu_);
    const bool local = local_.insert(engine).second;
    const bool shared = shared_tier && shared_.insert(engine).second;
    if (!local && !shared) return false;
    // A sweep of this node's tiers again when only the remote tier is new:
    // cheap, and what a revoked engine's late copies would need anyway.
    queue_.emplace_back(engine, shared);
  }
  cv_.notify_all();
  return true;
}

void RevocationSweeper::WaitIdle() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return (queue_.empty() && !busy_) || stop_; });
}

void RevocationSweeper::Run() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    auto [engine, shared] = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    bool done = false;
    try {
      done = sweep_(engine, shared);
    } catch (const std::exception& e) {  // no exception leaves the thread
      spdlog::error("revocation sweep of {} failed: {}", engine, e.what());
    }
    lock.lock();
    if (!done) {  // asked again (a register reply, another revoke): swept again
      local_.erase(engine);
      if (shared) shared_.erase(engine);
    }
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace pikv::node
