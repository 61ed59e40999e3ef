#include "bench_util.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

namespace pikv::bench {

RunResult RunTimed(int threads, double seconds, uint64_t min_ops,
                   const std::function<std::function<void()>(int thread)>& make_worker) {
  std::vector<std::function<void()>> workers;
  for (int i = 0; i < threads; ++i) workers.push_back(make_worker(i));
  std::vector<uint64_t> counts(threads, 0);
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  using Clock = std::chrono::steady_clock;
  const auto budget = std::chrono::duration<double>(seconds);
  Clock::time_point start;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      uint64_t n = 0;
      while (n < min_ops || Clock::now() - start < budget) {
        workers[i]();
        ++n;
      }
      counts[i] = n;
    });
  }
  start = Clock::now();
  go.store(true, std::memory_order_release);
  for (auto& t : pool) t.join();
  RunResult r;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (uint64_t c : counts) r.ops += c;
  return r;
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * double(v.size() - 1) + 0.5)];
}

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

void JsonLine::Add(const std::string& key, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, std::isfinite(value) ? "%.4g" : "null", value);
  items_.emplace_back(key, buf);
}

void JsonLine::Add(const std::string& key, const std::string& value) {
  items_.emplace_back(key, "\"" + value + "\"");
}

std::string JsonLine::str() const {
  std::string out = "{";
  for (size_t i = 0; i < items_.size(); ++i) {
    out += (i ? ", \"" : "\"") + items_[i].first + "\": " + items_[i].second;
  }
  return out + "}";
}

uint64_t MinorFaults(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string content((std::istreambuf_iterator<char>(f)), {});
  // Fields after the command name "(...)": state is field 3, minflt field 10.
  auto close = content.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(content.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 10 && rest >> field; ++i) {
  }
  return std::stoull(field);
}

}  // namespace pikv::bench
