// Small helpers every pikv benchmark shares: a timed multi-threaded loop, a
// readable table, and the final one-line JSON object of figures.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "pikv/common/text_table.h"

namespace pikv::bench {

// Runs `make_worker(i)()` repeatedly on `threads` threads until `seconds`
// have passed and every thread has done at least `min_ops`. Workers are made
// before the clock starts (so connection setup is not timed). Returns total
// operations and elapsed seconds.
struct RunResult {
  uint64_t ops = 0;
  double seconds = 0;
  double ops_per_second() const { return seconds > 0 ? ops / seconds : 0; }
};
RunResult RunTimed(int threads, double seconds, uint64_t min_ops,
                   const std::function<std::function<void()>(int thread)>& make_worker);

// Benchmark tables print to stdout.
class Table : public TextTable {
 public:
  using TextTable::TextTable;
  void Print() const { TextTable::Print(std::cout); }
};

std::string Fixed(double v, int decimals = 1);

// The q-quantile (0 <= q <= 1, nearest rank) of `v`; 0 when empty.
double Quantile(std::vector<double> v, double q);
inline double Median(std::vector<double> v) { return Quantile(std::move(v), 0.5); }

// Builds the final JSON line: {"key": number, ...} in insertion order.
class JsonLine {
 public:
  void Add(const std::string& key, double value);
  void Add(const std::string& key, const std::string& value);
  std::string str() const;

 private:
  std::vector<std::pair<std::string, std::string>> items_;
};

// Minor page faults of a process so far (from /proc/<pid>/stat).
uint64_t MinorFaults(int pid);

}  // namespace pikv::bench
