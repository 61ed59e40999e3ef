// Backoff: when to try a silent server again. Each failure doubles the wait
// (from `first` up to `most`); a success clears it. Time is passed in, so
// that tests need no sleeps.
// Thread-safety: none; its owner's thread.
#pragma once

#include <algorithm>
#include <chrono>

namespace pikv::client {

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;

  Backoff(std::chrono::milliseconds first, std::chrono::milliseconds most)
      : first_(first), most_(most) {}

  bool Due(Clock::time_point now) const { return now >= retry_at_; }
  void Failed(Clock::time_point now) {
    wait_ = wait_.count() == 0 ? first_ : std::min(2 * wait_, most_);
    retry_at_ = now + wait_;
  }
  void Succeeded() {
    wait_ = {};
    retry_at_ = {};
  }
  std::chrono::milliseconds wait() const { return wait_; }  // 0: not backing off

 private:
  std::chrono::milliseconds first_, most_;
  std::chrono::milliseconds wait_{0};
  Clock::time_point retry_at_{};
};

}  // namespace pikv::client
