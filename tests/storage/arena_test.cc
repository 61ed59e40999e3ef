#include "pikv/storage/arena.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <vector>

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
  auto arena = Arena::Create(1 << 16);
  ASSERT_TRUE(arena.ok());
  (*arena)->base()[0] = 1;
  (*arena)->base()[(1 << 16) - 1] = 2;
  EXPECT_GE((*arena)->fd(), 0);
}

}  // namespace
}  // namespace pikv::storage

namespace pikv::storage {
namespace {

// Every page resident (shared memory: mincore tells whether the page exists).
bool AllResident(const Arena& arena) {
  const long page = sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> vec((arena.size() + page - 1) / page);
  if (mincore(arena.base(), arena.size(), vec.data()) != 0) return false;
  for (unsigned char v : vec) {
    if (!(v & 1)) return false;
  }
  return true;
}

TEST(ArenaPrefaulterTest, FaultsEveryPageInAndChangesNoByte) {
  auto arena = Arena::Create(96ull << 20);  // not a multiple of the step
  ASSERT_TRUE(arena.ok());
  uint8_t* base = (*arena)->base();
  // Written before and while the prefaulter runs, as the node's clients do.
  std::memset(base, 0x5a, 1 << 20);
  ArenaPrefaulter prefaulter(**arena);
  std::memset(base + (80ull << 20), 0xa5, 1 << 20);
  for (int i = 0; i < 1000 && prefaulter.faulted_bytes() < (*arena)->size(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(prefaulter.faulted_bytes(), (*arena)->size());
  EXPECT_TRUE(AllResident(**arena));
  for (uint64_t i = 0; i < (1 << 20); i += 4096) {
    ASSERT_EQ(base[i], 0x5a);
    ASSERT_EQ(base[(80ull << 20) + i], 0xa5);
  }
  EXPECT_EQ(base[(40ull << 20)], 0);
}

TEST(ArenaPrefaulterTest, StopsPartWayWhenDestroyed) {
  auto arena = Arena::Create(4ull << 30);  // reserved, not backed: never faulted whole here
  ASSERT_TRUE(arena.ok());
  { ArenaPrefaulter prefaulter(**arena); }
  EXPECT_FALSE(AllResident(**arena)) << "the prefaulter went on after it was told to stop";
}

}  // namespace
}  // namespace pikv::storage
