// Every counter and gauge the node keeps, declared once, as rows of
// node_metrics.def (the node's own) and storage_metrics.def (storage's).
#pragma once

#include <vector>

#include "pikv/common/counter_set.h"
#include "pikv/common/stats_registry.h"
#include "pikv/proto/control_wire.h"
#include "pikv/storage/storage_stats.h"

namespace pikv::node::stats {

#define PIKV_METRIC PIKV_DECLARE_FAMILY
#include "pikv/node/node_metrics.def"

// The request handler's (besides its per-type counts: the request table's rows).
enum class RequestCounter {
#define PIKV_REQUEST_COUNTER PIKV_COUNTER_ENUM
#include "pikv/node/node_metrics.def"
  kCount
};
inline constexpr CounterRow<RequestCounter> kRequestCounters[] = {
#define PIKV_REQUEST_COUNTER(Name, family, label) {RequestCounter::Name, &family, label},
#include "pikv/node/node_metrics.def"
};
using RequestCounters = CounterSet<RequestCounter, kRequestCounters>;

enum class PullCounter {
#define PIKV_PULL_COUNTER PIKV_COUNTER_ENUM
#include "pikv/node/node_metrics.def"
  kCount
};
inline constexpr CounterRow<PullCounter> kPullCounters[] = {
#define PIKV_PULL_COUNTER(Name, family, label) {PullCounter::Name, &family, label},
#include "pikv/node/node_metrics.def"
};
using PullCounters = CounterSet<PullCounter, kPullCounters>;

enum class InboundCounter {
#define PIKV_INBOUND_COUNTER PIKV_COUNTER_ENUM
#include "pikv/node/node_metrics.def"
  kCount
};
inline constexpr CounterRow<InboundCounter> kInboundCounters[] = {
#define PIKV_INBOUND_COUNTER(Name, family, label) {InboundCounter::Name, &family, label},
#include "pikv/node/node_metrics.def"
};
using InboundCounters = CounterSet<InboundCounter, kInboundCounters>;

enum class ZeroCopyCounter {
#define PIKV_ZERO_COPY_COUNTER PIKV_COUNTER_ENUM
#include "pikv/node/node_metrics.def"
  kCount
};
inline constexpr CounterRow<ZeroCopyCounter> kZeroCopyCounters[] = {
#define PIKV_ZERO_COPY_COUNTER(Name, family, label) {ZeroCopyCounter::Name, &family, label},
#include "pikv/node/node_metrics.def"
};
using ZeroCopyCounters = CounterSet<ZeroCopyCounter, kZeroCopyCounters>;

// The storage manager's, its tiers' and queues', and the trust events are
// storage's (storage_stats.h, where storage's counter rows can name them);
// the node's code names them as its own.
using namespace storage::stats;  // NOLINT(google-build-using-namespace)

// Every family of the node, in /metrics order: its own, then storage's.
inline constexpr const MetricFamily* kOwnFamilies[] = {
#define PIKV_METRIC PIKV_LIST_FAMILY
#include "pikv/node/node_metrics.def"
};
inline constexpr auto kAll = JoinFamilies(kOwnFamilies, storage::stats::kAll);

}  // namespace pikv::node::stats

namespace pikv::node {

// The heartbeat's usage (control_wire.h), read from the node's samples by
// family: the one place the two are joined.
NodeUsage UsageOf(const std::vector<MetricSample>& samples);

}  // namespace pikv::node
