#include <gtest/gtest.h>

#include "pikv/node/reporter.h"

namespace pikv::node {
namespace {

std::vector<storage::TierEvent> Events(size_t n, uint64_t base = 0) {
  std::vector<storage::TierEvent> v;
  for (size_t i = 0; i < n; ++i) {
    v.push_back({TierKind::kCpu, storage::EventKind::kAdmit, ChunkKey{base + i, 1}, 100});
  }
  return v;
}

TEST(EventQueueTest, TakesInOrderInBatches) {
  EventQueue q(100);
  q.Push(Events(10));
  std::vector<storage::TierEvent> out;
  EXPECT_FALSE(q.Take(4, out));
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].key.hi, 0u);
  EXPECT_EQ(out[3].key.hi, 3u);
  EXPECT_EQ(q.size(), 6u);
}

TEST(EventQueueTest, OverflowDropsEverythingAndAsksForAFullResyncOnce) {
  EventQueue q(8);
  q.Push(Events(5));
  q.Push(Events(5, 100));  // 10 > 8: overflow
  EXPECT_EQ(q.size(), 0u);
  EXPECT_EQ(q.overflows(), 1u);
  q.Push(Events(3, 200));  // ignored: the resync will cover it
  EXPECT_EQ(q.size(), 0u);
  std::vector<storage::TierEvent> out;
  EXPECT_TRUE(q.Take(10, out));   // the reporter learns it must resync
  EXPECT_FALSE(q.Take(10, out));  // once
  q.Push(Events(2, 300));         // and the queue works again afterwards
  EXPECT_EQ(q.size(), 2u);
}

}  // namespace
}  // namespace pikv::node
