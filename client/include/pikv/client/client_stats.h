// What the client counts (ClientStats), each counter declared once, as rows
// of client_metrics.def: its field (its name in Python's stats() and the
// CLI's demo) and its family (its Prometheus name, for an engine that
// exports them).
#pragma once

#include <cstdint>
#include <string_view>

#include "pikv/common/stats_registry.h"

namespace pikv::client {

namespace stats {
#define PIKV_METRIC PIKV_DECLARE_FAMILY
#include "pikv/client/client_metrics.def"

inline constexpr const MetricFamily* kAll[] = {
#define PIKV_METRIC PIKV_LIST_FAMILY
#include "pikv/client/client_metrics.def"
};
}  // namespace stats

// A plain struct, not a CounterSet: a Client is used by one thread at a
// time, so its counts need no atomics, and its callers (tests, plan_bench)
// read the fields by name.
struct ClientStats {
#define PIKV_CLIENT_COUNTER(field, family, label) uint64_t field = 0;
#include "pikv/client/client_metrics.def"
};

namespace stats {
// Which family (and label) reads each ClientStats field.
struct ClientCounterRow {
  const MetricFamily* family;
  std::string_view label;  // empty for an unlabelled family
  uint64_t ClientStats::*field;
};
inline constexpr ClientCounterRow kClientCounters[] = {
#define PIKV_CLIENT_COUNTER(field, family, label) {&family, label, &ClientStats::field},
#include "pikv/client/client_metrics.def"
};
}  // namespace stats

// Every counter of `s` as a sample of its family.
void SampleClientStats(const ClientStats& s, StatsSink& out);

}  // namespace pikv::client
