// Counters as data (RocksDB's Tickers are the model): a part's counters are
// atomics indexed by an enum of its own, and one table declares, per enum
// value, the metric family (and label value) it is read as. The stats
// registry samples a set through its table, so a new counter is an enum
// value, a table row and the line that counts it: nothing is copied by hand
// into a snapshot struct or a source.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "pikv/common/stats_registry.h"

namespace pikv {

// One counter's declaration: read as `family` (with `label` as its label's
// value where the family has one).
template <typename Counter>
struct CounterRow {
  Counter counter;
  const MetricFamily* family;
  std::string_view label = {};
};

// Whether `rows` declares each of the enum's first `n` values exactly once,
// in order (for a static_assert beside the table).
template <typename Counter>
constexpr bool DeclaresEachOnce(std::span<const CounterRow<Counter>> rows, size_t n) {
  if (rows.size() != n) return false;
  for (size_t i = 0; i < n; ++i) {
    if (static_cast<size_t>(rows[i].counter) != i) return false;
  }
  return true;
}

// `Rows` is the declaration table: one row per enum value, in enum order;
// the enum ends with kCount (so a value without a row does not compile).
template <typename Counter, const auto& Rows>
class CounterSet {
 public:
  static constexpr size_t kSize = static_cast<size_t>(Counter::kCount);
  static_assert(DeclaresEachOnce<Counter>(Rows, kSize),
                "a counter table declares each enum value once, in order");

  void Add(Counter c, uint64_t n = 1) { values_[Index(c)].fetch_add(n, std::memory_order_relaxed); }
  uint64_t operator[](Counter c) const { return values_[Index(c)].load(std::memory_order_relaxed); }

  // Every counter, as its declared family (and label) reads it.
  void Sample(StatsSink& out) const {
    for (const CounterRow<Counter>& row : Rows) {
      if (row.label.empty()) {
        out.Add(*row.family, (*this)[row.counter]);
      } else {
        out.Add(*row.family, row.label, (*this)[row.counter]);
      }
    }
  }

 private:
  static constexpr size_t Index(Counter c) { return static_cast<size_t>(c); }
  std::array<std::atomic<uint64_t>, kSize> values_{};
};

}  // namespace pikv

// A counter set's rows live in its part's .def file beside the families they
// are read as, one macro per set:
//   PIKV_STORAGE_COUNTER(Name, family, label)
// The header reads the file twice: with the set's macro as PIKV_COUNTER_ENUM
// (the enum's values, in row order) and as a row of its table
// ({Set::Name, &family, label}).
#define PIKV_COUNTER_ENUM(Name, family, label) Name,
