// Every counter and gauge of the controller's /metrics, declared once, as
// rows of controller_metrics.def.
#pragma once

#include "pikv/common/counter_set.h"
#include "pikv/common/stats_registry.h"

namespace pikv::controller::stats {

#define PIKV_METRIC PIKV_DECLARE_FAMILY
#include "pikv/controller/controller_metrics.def"

inline constexpr const MetricFamily* kAll[] = {
#define PIKV_METRIC PIKV_LIST_FAMILY
#include "pikv/controller/controller_metrics.def"
};

enum class HandlerCounter {
#define PIKV_HANDLER_COUNTER PIKV_COUNTER_ENUM
#include "pikv/controller/controller_metrics.def"
  kCount
};
inline constexpr CounterRow<HandlerCounter> kHandlerCounters[] = {
#define PIKV_HANDLER_COUNTER(Name, family, label) {HandlerCounter::Name, &family, label},
#include "pikv/controller/controller_metrics.def"
};
using HandlerCounters = CounterSet<HandlerCounter, kHandlerCounters>;

}  // namespace pikv::controller::stats
