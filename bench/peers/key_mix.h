// The skewed key mix of bench/peers' tiers workload, drawn alike by every
// client (bench/peers/key_mix.py is its Python twin): Zipf(theta) over the
// ranks 0..n-1 by inverse CDF, rank r naming object (r * 2654435761) % n, so
// the hot objects are spread over the order they were loaded in (an LRU
// tier does not start out holding exactly the hottest ones).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace pikv::bench {

class ZipfKeys {
 public:
  ZipfKeys(size_t n, double theta) {
    double sum = 0;
    cdf_.reserve(n);
    for (size_t r = 0; r < n; ++r) cdf_.push_back(sum += std::pow(double(r + 1), -theta));
    for (double& c : cdf_) c /= sum;
  }
  // An object index in 0..n-1.
  size_t operator()(std::mt19937_64& rng) const {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    const size_t rank = std::min<size_t>(
        std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin(), cdf_.size() - 1);
    return rank * 2654435761ull % cdf_.size();
  }

 private:
  std::vector<double> cdf_;
};

}  // namespace pikv::bench
