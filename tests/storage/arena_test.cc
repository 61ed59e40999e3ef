#include "pikv/storage/arena.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace pikv::storage {
namespace {

TEST(RangeAllocatorTest, CoalescesNeighboursOnFree) {
  RangeAllocator a(64 * 10);
  auto x = a.Allocate(64), y = a.Allocate(64), z = a.Allocate(64);
  ASSERT_TRUE(x && y && z);
  a.Free(*y, 64);
  a.Free(*x, 64);
  a.Free(*z, 64);
  EXPECT_EQ(a.free_ranges(), 1u);
  EXPECT_EQ(a.used(), 0u);
  EXPECT_TRUE(a.Allocate(64 * 10));  // the whole region is one range again
}

TEST(RangeAllocatorTest, RandomWorkloadNeverOverlapsOrOverflows) {
  const uint64_t cap = 1 << 20;
  RangeAllocator a(cap);
  std::map<uint64_t, uint64_t> live;  // offset -> rounded size
  std::mt19937 rng(1);
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      uint64_t n = 1 + rng() % 20000;
      if (auto off = a.Allocate(n)) {
        uint64_t sz = RangeAllocator::RoundUp(n);
        ASSERT_LE(*off + sz, cap);
        ASSERT_EQ(*off % RangeAllocator::kAlign, 0u);
        auto next = live.lower_bound(*off);
        if (next != live.end()) {
          ASSERT_LE(*off + sz, next->first);
        }
        if (next != live.begin()) {
          auto prev = std::prev(next);
          ASSERT_LE(prev->first + prev->second, *off);
        }
        live[*off] = sz;
      }
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      a.Free(it->first, it->second);
      live.erase(it);
    }
    uint64_t used = 0;
    for (auto& [o, s] : live) used += s;
    ASSERT_EQ(a.used(), used);
  }
}

TEST(ArenaTest, MapsWritableSharedMemory) {
  auto arena = Arena::Create(1 << 16, /*prefault=*/true);
  ASSERT_TRUE(arena.ok());
  (*arena)->base()[0] = 1;
  (*arena)->base()[(1 << 16) - 1] = 2;
  EXPECT_GE((*arena)->fd(), 0);
}

}  // namespace
}  // namespace pikv::storage
