// The storage part's metric families and the storage manager's counters,
// declared once, as rows of storage_metrics.def. They live here, not in the
// node's node_stats.h, because storage is below the node (its README): the
// manager's counter rows must name their families. The node lists these
// among its own (node::stats::kAll) and samples them.
#pragma once

#include "pikv/common/counter_set.h"
#include "pikv/common/stats_registry.h"

namespace pikv::storage::stats {

#define PIKV_METRIC PIKV_DECLARE_FAMILY
#include "pikv/storage/storage_metrics.def"

// Every family above, in the order /metrics shows them.
inline constexpr const MetricFamily* kAll[] = {
#define PIKV_METRIC PIKV_LIST_FAMILY
#include "pikv/storage/storage_metrics.def"
};

enum class StorageCounter {
#define PIKV_STORAGE_COUNTER PIKV_COUNTER_ENUM
#include "pikv/storage/storage_metrics.def"
  kCount
};
inline constexpr CounterRow<StorageCounter> kStorageCounters[] = {
#define PIKV_STORAGE_COUNTER(Name, family, label) {StorageCounter::Name, &family, label},
#include "pikv/storage/storage_metrics.def"
};
using StorageCounters = CounterSet<StorageCounter, kStorageCounters>;

}  // namespace pikv::storage::stats
