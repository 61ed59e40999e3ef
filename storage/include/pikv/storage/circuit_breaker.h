// CircuitBreaker: fail fast while a dependency is down, probe it with backoff.
//
// Closed: every call is allowed; `failures_to_open` consecutive failures open
// it. Open: calls are refused until the cooldown passes, then one trial call
// is allowed (half-open). A successful trial closes it; a failed one reopens
// it with the cooldown doubled, up to `max_cooldown`. This is also the
// reconnect backoff of the remote tier.
// Not thread-safe: the owner serializes calls. Time is passed in, for tests.
#pragma once

#include <chrono>

namespace pikv::storage {

class CircuitBreaker {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    int failures_to_open = 3;
    std::chrono::milliseconds cooldown{250};
    std::chrono::milliseconds max_cooldown{5000};
  };
  enum class State { kClosed, kOpen, kHalfOpen };

  explicit CircuitBreaker(Options options) : options_(options), cooldown_(options.cooldown) {}

  bool Allow(Clock::time_point now);
  void OnSuccess();
  void OnFailure(Clock::time_point now);
  State state() const { return state_; }

 private:
  Options options_;
  State state_ = State::kClosed;
  int failures_ = 0;
  std::chrono::milliseconds cooldown_;
  Clock::time_point reopen_at_{};
};

}  // namespace pikv::storage
