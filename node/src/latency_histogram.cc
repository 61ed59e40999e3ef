#include "pikv/node/latency_histogram.h"

#include <cstdio>

namespace pikv::node {

void LatencyHistogram::Record(std::chrono::nanoseconds d) {
  const double s = d.count() * 1e-9;
  size_t b = 0;
  while (b < kBounds.size() && s > kBounds[b]) ++b;
  buckets_[b].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<uint64_t>(d.count()), std::memory_order_relaxed);
}

std::string LatencyHistogram::Render(const std::string& name, const std::string& labels) const {
  std::string out;
  uint64_t cumulative = 0;
  char line[256];
  for (size_t b = 0; b <= kBounds.size(); ++b) {
    cumulative += buckets_[b].load(std::memory_order_relaxed);
    if (b < kBounds.size()) {
      std::snprintf(line, sizeof line, "%s_bucket{%s,le=\"%g\"} %llu\n", name.c_str(),
                    labels.c_str(), kBounds[b], static_cast<unsigned long long>(cumulative));
    } else {
      std::snprintf(line, sizeof line, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name.c_str(),
                    labels.c_str(), static_cast<unsigned long long>(cumulative));
    }
    out += line;
  }
  std::snprintf(line, sizeof line, "%s_sum{%s} %.9f\n%s_count{%s} %llu\n", name.c_str(),
                labels.c_str(), sum_ns_.load() * 1e-9, name.c_str(), labels.c_str(),
                static_cast<unsigned long long>(count_.load()));
  return out + line;
}

}  // namespace pikv::node
