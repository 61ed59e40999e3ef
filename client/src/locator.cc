#include "locator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>

namespace pikv::client {

Locator::Locator(std::unique_ptr<rpc::AdminClient> controller, std::string host)
    : controller_(std::move(controller)), host_(std::move(host)), thread_([this] { Run(); }) {}

Locator::~Locator() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();  // a locate in flight ends within the controller's deadline
}

Locator::Answer Locator::Locate(const std::vector<ChunkKey>& keys,
                                std::chrono::milliseconds budget) {
  Answer answer;
  answer.replicas.resize(keys.size());
  std::unique_lock lock(mu_);
  const auto now = Clock::now();
  std::vector<size_t> unknown;
  for (size_t i = 0; i < keys.size(); ++i) {
    auto it = kept_.find(keys[i]);
    if (it != kept_.end() && it->second.until > now) {
      answer.replicas[i] = it->second.replicas;
    } else {
      unknown.push_back(i);
    }
  }
  if (unknown.empty()) {
    answer.outcome = Outcome::kAnswered;
    return answer;
  }
  // A locate in flight (or the first dial) is waited for while it is younger
  // than a budget: one older is already late (a hung controller), and each
  // plan behind it would wait its whole budget for nothing.
  const auto deadline = now + budget;
  const auto free_by = std::min(deadline, busy_since_ + budget);
  if (!wake_.wait_until(lock, free_by, [&] { return !busy_; })) return answer;  // kSkipped
  if (!backoff_.Due(Clock::now())) return answer;                               // kSkipped
  job_.clear();
  for (size_t i : unknown) job_.push_back(keys[i]);
  busy_ = true;
  busy_since_ = Clock::now();
  const uint64_t mine = ++posted_;
  wake_.notify_all();
  if (!wake_.wait_until(lock, deadline, [&] { return finished_ >= mine; })) {
    gave_up_ = mine;  // its answer, when it comes, is kept for the next plans
    answer.outcome = Outcome::kNoAnswer;
    return answer;
  }
  if (!last_.ok()) {
    answer.outcome = Outcome::kNoAnswer;
    return answer;
  }
  for (size_t j = 0; j < unknown.size(); ++j) answer.replicas[unknown[j]] = (*last_)[j];
  answer.outcome = Outcome::kAnswered;
  return answer;
}

void Locator::Keep(const std::vector<ChunkKey>& keys,
                   const std::vector<std::vector<Replica>>& replicas, Clock::time_point now) {
  if (kept_.size() + keys.size() > kMaxKept) {
    std::erase_if(kept_, [&](const auto& entry) { return entry.second.until <= now; });
    if (kept_.size() + keys.size() > kMaxKept) kept_.clear();
  }
  // Only keys some node holds: a "nowhere" kept would hide a chunk stored
  // meanwhile, where asking again costs no more than the budget.
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!replicas[i].empty()) kept_[keys[i]] = Kept{replicas[i], now + kAnswerTtl};
  }
}

Result<std::vector<std::vector<Replica>>> Locator::Ask(const std::vector<ChunkKey>& keys) {
  try {
    return controller_->Locate(keys, host_);
  } catch (const std::exception& e) {  // out of memory, out of sockets: a failed locate
    return Unavailable(std::string("locate: ") + e.what());
  } catch (...) {
    return Unavailable("locate: an unknown exception");
  }
}

void Locator::Run() {
  try {
    // Dial (and, with several controllers, find the leader) before the first
    // plan needs it: a connection's set-up would not fit a plan's budget.
    // busy_ was set when this Locator was built, so no plan posts meanwhile.
    const bool reached = Ask({}).ok();
    std::unique_lock lock(mu_);
    busy_ = false;
    if (!reached) backoff_.Failed(Clock::now());
    wake_.notify_all();
    while (true) {
      wake_.wait(lock, [&] { return stop_ || posted_ > finished_; });
      if (stop_) return;
      const std::vector<ChunkKey> keys = job_;
      const uint64_t job = posted_;
      lock.unlock();
      auto located = Ask(keys);
      lock.lock();
      const auto now = Clock::now();
      if (located.ok()) {  // one entry per key (DecodeLocateReply)
        backoff_.Succeeded();
        if (gave_up_ == job) Keep(keys, *located, now);
      } else {
        backoff_.Failed(now);
      }
      last_ = std::move(located);
      finished_ = job;
      busy_ = false;
      wake_.notify_all();
    }
  } catch (const std::exception& e) {  // out of memory here: plans go on local-first
    spdlog::error("locator stopped: {}", e.what());
    std::lock_guard lock(mu_);
    busy_ = true;  // for good: no plan waits on a thread that is gone
  }
}

}  // namespace pikv::client
