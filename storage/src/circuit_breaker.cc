#include "pikv/storage/circuit_breaker.h"

#include <algorithm>

namespace pikv::storage {

bool CircuitBreaker::Allow(Clock::time_point now) {
  switch (state_) {
    case State::kClosed:
      return true;
    case State::kHalfOpen:
      return false;  // one trial at a time
    case State::kOpen:
      if (now < reopen_at_) return false;
      state_ = State::kHalfOpen;
      return true;
  }
  return false;
}

void CircuitBreaker::OnSuccess() {
  state_ = State::kClosed;
  failures_ = 0;
  cooldown_ = options_.cooldown;
}

void CircuitBreaker::OnFailure(Clock::time_point now) {
  if (state_ == State::kHalfOpen) {
    cooldown_ = std::min(cooldown_ * 2, options_.max_cooldown);
  } else if (++failures_ < options_.failures_to_open) {
    return;
  }
  state_ = State::kOpen;
  reopen_at_ = now + cooldown_;
}

}  // namespace pikv::storage
