// LatencyHistogram: request latencies in fixed Prometheus-style buckets,
// recorded lock-free from any thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace pikv::node {

class LatencyHistogram {
 public:
  static constexpr std::array<double, 12> kBounds = {50e-6, 100e-6, 250e-6, 500e-6, 1e-3,   2.5e-3,
                                                     5e-3,  10e-3,  25e-3,  50e-3,  100e-3, 250e-3};
  void Record(std::chrono::nanoseconds d);
  // Prometheus text for `name` with `labels` (e.g. op="get"): _bucket, _sum, _count.
  std::string Render(const std::string& name, const std::string& labels) const;

 private:
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> buckets_{};  // last: +Inf
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_ns_{0};
};

}  // namespace pikv::node
