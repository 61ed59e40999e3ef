#include "pikv/client/client_stats.h"

namespace pikv::client {

void SampleClientStats(const ClientStats& s, StatsSink& out) {
  for (const stats::ClientCounterRow& c : stats::kClientCounters)
    out.Add(*c.family, c.label, s.*c.field);
}

}  // namespace pikv::client
