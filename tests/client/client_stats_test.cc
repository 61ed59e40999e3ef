// The client's counters are declared once (client_stats.h) and each one
// reaches its own field, under a declared family.
#include "pikv/client/client_stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace pikv::client {
namespace {

TEST(ClientStatsTest, EveryCounterHasItsOwnFieldUnderADeclaredFamily) {
  // Each counter set to its own value, so a row that reads the wrong member
  // shows.
  ClientStats s;
  constexpr size_t kCounters = sizeof(ClientStats) / sizeof(uint64_t);
  auto* counters = reinterpret_cast<uint64_t*>(&s);
  for (size_t i = 0; i < kCounters; ++i) counters[i] = 1000 + i;

  StatsSink sink;
  SampleClientStats(s, sink);
  const std::vector<MetricSample> samples = sink.Take();
  ASSERT_EQ(samples.size(), kCounters) << "a ClientStats counter without a sample, or two";
  std::set<std::string> fields;
  std::set<uint64_t> values;
  for (const MetricSample& sample : samples) {
    EXPECT_TRUE(std::find(std::begin(stats::kAll), std::end(stats::kAll), sample.family) !=
                std::end(stats::kAll))
        << sample.family->metric << " is not in stats::kAll";
    fields.insert(FieldName(sample));
    values.insert(std::get<uint64_t>(sample.value));
  }
  EXPECT_EQ(fields.size(), kCounters) << "two counters share a field";
  EXPECT_EQ(values.size(), kCounters) << "a counter is sampled twice, another never";
  for (const MetricFamily* family : stats::kAll) {
    EXPECT_TRUE(std::any_of(samples.begin(), samples.end(),
                            [&](const MetricSample& x) { return x.family == family; }))
        << family->metric << " is declared but never sampled";
  }
  EXPECT_TRUE(fields.contains("planned_local") && fields.contains("controller_timeouts") &&
              fields.contains("stores_ran_inline"));
}

}  // namespace
}  // namespace pikv::client
