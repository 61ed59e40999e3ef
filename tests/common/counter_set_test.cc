// Counters as data: a set is sampled through its declaration table, each
// counter as its declared family and label.
#include "pikv/common/counter_set.h"

#include <gtest/gtest.h>

#include <map>
#include <thread>
#include <vector>

namespace pikv {
namespace {

constexpr MetricFamily kSeen{"t_seen_total", MetricKind::kCounter, "seen", "", "seen"};
constexpr MetricFamily kByKind{"t_kind_total", MetricKind::kCounter, "by kind", "kind", "kind.{}"};
enum class Event { kSeen, kRed, kBlue, kCount };
constexpr CounterRow<Event> kEvents[] = {
    {Event::kSeen, &kSeen}, {Event::kRed, &kByKind, "red"}, {Event::kBlue, &kByKind, "blue"}};
using Events = CounterSet<Event, kEvents>;

TEST(CounterSetTest, EachCounterIsReadAsItsDeclaredFamilyAndLabel) {
  Events events;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) events.Add(Event::kSeen);
    });
  }
  for (auto& t : threads) t.join();
  events.Add(Event::kBlue, 7);
  EXPECT_EQ(events[Event::kSeen], 4000u);
  EXPECT_EQ(events[Event::kRed], 0u);

  const MetricFamily* families[] = {&kSeen, &kByKind};
  StatsRegistry registry(families);
  registry.AddSource([&](StatsSink& out) { events.Sample(out); });
  std::map<std::string, uint64_t> fields;
  for (auto& [name, value] : registry.FieldValues()) fields[name] = value;
  EXPECT_EQ(fields,
            (std::map<std::string, uint64_t>{{"seen", 4000}, {"kind.red", 0}, {"kind.blue", 7}}));
  EXPECT_NE(registry.PrometheusText().find("t_kind_total{kind=\"blue\"} 7"), std::string::npos);
}

TEST(CounterSetTest, ATableMustDeclareEachValueOnceInOrder) {
  constexpr CounterRow<Event> swapped[] = {
      {Event::kSeen, &kSeen}, {Event::kBlue, &kByKind, "blue"}, {Event::kRed, &kByKind, "red"}};
  constexpr CounterRow<Event> short_one[] = {{Event::kSeen, &kSeen}};
  static_assert(DeclaresEachOnce<Event>(kEvents, 3));
  EXPECT_FALSE(DeclaresEachOnce<Event>(swapped, 3));
  EXPECT_FALSE(DeclaresEachOnce<Event>(short_one, 3));
}

}  // namespace
}  // namespace pikv
