#include "pikv/storage/cpu_tier.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "pikv/proto/chunk_object.h"
#include "pikv/storage/arena.h"
#include "test_support.h"

namespace pikv::storage {
namespace {

using testing::MakeObject;
using testing::TestObject;

class CpuTierTest : public ::testing::Test {
 protected:
  void Open(uint64_t capacity) {
    auto t = CpuTier::Create({capacity, false}, [this](std::span<const TierEvent> ev) {
      std::lock_guard lock(events_mu_);
      events_.insert(events_.end(), ev.begin(), ev.end());
    });
    ASSERT_TRUE(t.ok());
    tier_ = std::move(*t);
  }
  // Objects of ~4 KiB; the 8-object tier below holds exactly 8 of them.
  TestObject Obj(uint64_t seed) { return MakeObject(seed, 4096); }
  uint64_t ObjSize() { return RangeAllocator::RoundUp(Obj(0).bytes.size()); }
  void Put(const TestObject& o) { ASSERT_TRUE(tier_->Put(o.key, o.bytes).ok()); }
  size_t Count(EventKind kind) {
    std::lock_guard lock(events_mu_);
    return std::count_if(events_.begin(), events_.end(),
                         [&](const TierEvent& e) { return e.kind == kind; });
  }

  std::unique_ptr<CpuTier> tier_;
  std::mutex events_mu_;
  std::vector<TierEvent> events_;
};

TEST_F(CpuTierTest, EvictsLeastRecentlyUsedFirst) {
  Open(ObjSize() * 3);
  auto a = Obj(1), b = Obj(2), c = Obj(3), d = Obj(4);
  Put(a);
  Put(b);
  Put(c);
  ASSERT_TRUE(tier_->Get(a.key).ok());  // a is now most recent; b is oldest
  Put(d);
  EXPECT_TRUE(tier_->Contains(a.key));
  EXPECT_FALSE(tier_->Contains(b.key));
  EXPECT_TRUE(tier_->Contains(c.key));
  EXPECT_TRUE(tier_->Contains(d.key));
  EXPECT_EQ(tier_->LruOrder(), (std::vector<ChunkKey>{d.key, a.key, c.key}));
  EXPECT_EQ(Count(EventKind::kAdmit), 4u);
  EXPECT_EQ(Count(EventKind::kEvict), 1u);
}

// The base's owner scans, over what the tier's OwnersOf and Keys answer.
TEST_F(CpuTierTest, OwnersOfNamesHeldObjectsOwnersAndScansFindAWritersKeys) {
  Open(ObjSize() * 4);
  auto a = Obj(1), b = Obj(2), absent = Obj(3);
  std::vector<uint8_t> stamped(b.bytes.data(), b.bytes.data() + b.bytes.size());
  ASSERT_TRUE(StampWriter(stamped, "engine-b").ok());
  Put(a);
  ASSERT_TRUE(tier_->Put(b.key, SharedBuffer::FromVector(std::move(stamped))).ok());
  Tier& tier = *tier_;
  const ChunkKey keys[] = {a.key, b.key, absent.key};
  const auto owners = tier.OwnersOf(keys);
  ASSERT_EQ(owners.size(), 3u);
  EXPECT_EQ(owners[0], (Owner{"", std::string(kUnknownWriter)}));
  EXPECT_EQ(owners[1], (Owner{"", "engine-b"}));
  EXPECT_EQ(owners[2], std::nullopt);
  EXPECT_EQ(tier.OwnerOf(absent.key), std::nullopt);
  EXPECT_EQ(tier.WrittenBy(keys, "engine-b"), (std::vector<ChunkKey>{b.key}));
  auto written = tier.KeysWrittenBy("engine-b");
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(*written, (std::vector<ChunkKey>{b.key}));
}

TEST_F(CpuTierTest, PinnedObjectsAreSkippedByEviction) {
  Open(ObjSize() * 2);
  auto a = Obj(1), b = Obj(2), c = Obj(3), d = Obj(4);
  Put(a);
  Put(b);
  ASSERT_TRUE(tier_->Pin(a.key).ok());  // a is oldest but pinned
  Put(c);
  EXPECT_TRUE(tier_->Contains(a.key));
  EXPECT_FALSE(tier_->Contains(b.key));
  ASSERT_TRUE(tier_->Pin(c.key).ok());
  // Everything pinned: a new object is rejected, nothing is evicted.
  EXPECT_EQ(tier_->Put(d.key, d.bytes).code(), ErrorCode::kRejected);
  EXPECT_TRUE(tier_->Contains(a.key));
  EXPECT_TRUE(tier_->Contains(c.key));
  ASSERT_TRUE(tier_->Unpin(a.key).ok());
  EXPECT_EQ(tier_->Unpin(a.key).code(), ErrorCode::kInvalidArgument);  // pins are counted
  Put(d);
  EXPECT_FALSE(tier_->Contains(a.key));
  EXPECT_EQ(tier_->Stats().rejects, 1u);
}

TEST_F(CpuTierTest, HeldObjectSurvivesRemovalUntilReleased) {
  Open(ObjSize() * 2);
  auto a = Obj(1);
  Put(a);
  auto held = tier_->Get(a.key);
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(tier_->Remove(a.key).ok());
  EXPECT_FALSE(tier_->Contains(a.key));
  // Churn the rest of the arena: a's range must not be handed out again.
  auto b = Obj(2), c = Obj(3);
  Put(b);
  Put(c);  // evicts b: a's range is still taken
  EXPECT_FALSE(tier_->Contains(b.key));
  EXPECT_EQ(tier_->Stats().used_bytes, 2 * ObjSize());
  EXPECT_TRUE(std::equal(held->data(), held->data() + held->size(), a.bytes.data(),
                         a.bytes.data() + a.bytes.size()));
  held = NotFound();  // release
  EXPECT_EQ(tier_->Stats().used_bytes, ObjSize());
  Put(b);  // fits beside c now
  EXPECT_TRUE(tier_->Contains(c.key));
}

TEST_F(CpuTierTest, HeldObjectIsNotEvictedForCapacity) {
  Open(ObjSize() * 2);
  auto a = Obj(1), b = Obj(2), c = Obj(3);
  Put(a);
  Put(b);
  auto held = tier_->Get(b.key);        // b is now most recent but a reader holds it
  ASSERT_TRUE(tier_->Get(a.key).ok());  // a most recent; b is the LRU victim but in use
  Put(c);
  EXPECT_TRUE(tier_->Contains(b.key));
  EXPECT_FALSE(tier_->Contains(a.key));
}

TEST_F(CpuTierTest, TooLargeObjectIsRejected) {
  Open(ObjSize());
  auto big = MakeObject(9, 64 * 1024);
  EXPECT_EQ(tier_->Put(big.key, big.bytes).code(), ErrorCode::kRejected);
}

TEST_F(CpuTierTest, RandomWorkloadNeverExceedsCapacity) {
  const uint64_t capacity = 1 << 20;
  Open(capacity);
  std::mt19937 rng(7);
  std::vector<TestObject> pool;
  for (uint64_t i = 0; i < 64; ++i) pool.push_back(MakeObject(i, 1024 + (rng() % 64) * 1024));
  std::map<ChunkKey, int> pins;
  std::vector<SharedBuffer> readers;
  for (int step = 0; step < 5000; ++step) {
    const TestObject& o = pool[rng() % pool.size()];
    switch (rng() % 6) {
      case 0:
      case 1: {
        Status s = tier_->Put(o.key, o.bytes);
        ASSERT_TRUE(s.ok() || s.code() == ErrorCode::kRejected) << s.ToString();
        break;
      }
      case 2: {
        auto r = tier_->Get(o.key);
        if (r.ok()) {
          ASSERT_TRUE(std::equal(r->data(), r->data() + r->size(), o.bytes.data(),
                                 o.bytes.data() + o.bytes.size()));
          if (readers.size() < 4) readers.push_back(*r);
        }
        break;
      }
      case 3:
        if (pins[o.key] < 2 && tier_->Pin(o.key).ok()) pins[o.key]++;
        break;
      case 4:
        if (pins[o.key] > 0 && tier_->Unpin(o.key).ok()) pins[o.key]--;
        break;
      case 5:
        if (!readers.empty()) readers.erase(readers.begin() + rng() % readers.size());
        break;
    }
    TierStats s = tier_->Stats();
    ASSERT_LE(s.used_bytes, capacity);
    // Every pinned object is still there.
    for (auto& [k, n] : pins) {
      if (n > 0) {
        ASSERT_TRUE(tier_->Contains(k));
      }
    }
  }
  EXPECT_GT(tier_->Stats().evictions, 0u);  // the workload did exercise eviction
}

}  // namespace
}  // namespace pikv::storage
