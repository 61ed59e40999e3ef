#include "pikv/controller/registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

namespace pikv::controller {
namespace {

ChunkKey Key(uint64_t i) { return {i * 0x9e3779b97f4a7c15ULL + 1, i * 0xc2b2ae3d27d4eb4fULL + 7}; }
Location Loc(uint16_t node, TierKind tier = TierKind::kCpu) { return {node, tier}; }

std::set<uint16_t> Codes(const Registry& r, const ChunkKey& k) {
  std::vector<Location> out;
  r.Locate(k, out);
  std::set<uint16_t> codes;
  for (auto l : out) codes.insert(l.Code());
  EXPECT_EQ(codes.size(), out.size()) << "duplicate location";
  return codes;
}

TEST(RegistryTest, AdmitEvictLocate) {
  Registry r(4);
  EXPECT_TRUE(r.Admit(Key(1), Loc(1)));
  EXPECT_FALSE(r.Admit(Key(1), Loc(1)));  // idempotent
  EXPECT_TRUE(r.Admit(Key(1), Loc(2, TierKind::kDisk)));
  EXPECT_EQ(Codes(r, Key(1)), (std::set<uint16_t>{Loc(1).Code(), Loc(2, TierKind::kDisk).Code()}));
  EXPECT_EQ(r.keys(), 1u);
  EXPECT_EQ(r.locations(), 2u);
  EXPECT_TRUE(r.Evict(Key(1), Loc(1)));
  EXPECT_FALSE(r.Evict(Key(1), Loc(1)));
  EXPECT_TRUE(r.Evict(Key(1), Loc(2, TierKind::kDisk)));
  EXPECT_TRUE(Codes(r, Key(1)).empty());
  EXPECT_EQ(r.keys(), 0u);
  EXPECT_EQ(r.locations(), 0u);
}

TEST(RegistryTest, ManyLocationsSpillAndComeBack) {
  Registry r(1);
  for (uint16_t n = 1; n <= 10; ++n) EXPECT_TRUE(r.Admit(Key(5), Loc(n)));
  EXPECT_EQ(Codes(r, Key(5)).size(), 10u);
  for (uint16_t n = 1; n <= 8; ++n) EXPECT_TRUE(r.Evict(Key(5), Loc(n)));
  EXPECT_EQ(Codes(r, Key(5)), (std::set<uint16_t>{Loc(9).Code(), Loc(10).Code()}));
  EXPECT_EQ(r.keys(), 1u);
}

TEST(RegistryTest, RemoveNodeAndInventory) {
  Registry r(8);
  for (uint64_t i = 0; i < 1000; ++i) {
    r.Admit(Key(i), Loc(1 + i % 3));
    if (i % 2 == 0) r.Admit(Key(i), Loc(7, TierKind::kDisk));
  }
  EXPECT_EQ(r.CountOn(7, TierKind::kDisk), 500u);
  EXPECT_EQ(r.Inventory(7, TierKind::kDisk).size(), 500u);
  EXPECT_EQ(r.Inventory(7, TierKind::kCpu).size(), 0u);
  EXPECT_EQ(r.RemoveNode(7), 500u);
  EXPECT_EQ(r.CountOn(7, TierKind::kDisk), 0u);
  EXPECT_EQ(r.keys(), 1000u);
  EXPECT_EQ(r.RemoveNode(1), 334u);
  EXPECT_EQ(r.keys(), 666u);
  for (uint64_t i = 0; i < 1000; ++i) EXPECT_EQ(Codes(r, Key(i)).size(), i % 3 == 0 ? 0u : 1u) << i;
}

// Random operations against a plain map model, across table growth,
// backward-shift deletion, spills and node removal.
TEST(RegistryTest, MatchesAShadowModelUnderRandomOperations) {
  Registry r(4);
  std::map<ChunkKey, std::set<uint16_t>> model;
  std::mt19937_64 rng(42);
  const uint64_t key_space = 5000;
  for (int step = 0; step < 200000; ++step) {
    ChunkKey k = Key(rng() % key_space);
    Location l = Loc(1 + rng() % 12, static_cast<TierKind>(rng() % 3));
    switch (rng() % 10) {
      case 0:
      case 1:
      case 2:
      case 3:
      case 4: {
        bool added = model[k].insert(l.Code()).second;
        ASSERT_EQ(r.Admit(k, l), added);
        break;
      }
      case 5:
      case 6:
      case 7:
      case 8: {
        auto it = model.find(k);
        bool had = it != model.end() && it->second.erase(l.Code()) > 0;
        if (it != model.end() && it->second.empty()) model.erase(it);
        ASSERT_EQ(r.Evict(k, l), had);
        break;
      }
      case 9:
        if (rng() % 500 == 0) {
          uint16_t node = 1 + rng() % 12;
          uint64_t expect = 0;
          for (auto it = model.begin(); it != model.end();) {
            for (auto c = it->second.begin(); c != it->second.end();) {
              if (Location::FromCode(*c).node == node) {
                c = it->second.erase(c);
                expect++;
              } else {
                ++c;
              }
            }
            it = it->second.empty() ? model.erase(it) : std::next(it);
          }
          ASSERT_EQ(r.RemoveNode(node), expect);
        }
        break;
    }
  }
  uint64_t locations = 0;
  for (uint64_t i = 0; i < key_space; ++i) {
    auto it = model.find(Key(i));
    ASSERT_EQ(Codes(r, Key(i)), it == model.end() ? std::set<uint16_t>{} : it->second)
        << "key " << i;
    if (it != model.end()) locations += it->second.size();
  }
  EXPECT_EQ(r.keys(), model.size());
  EXPECT_EQ(r.locations(), locations);
  for (uint16_t node = 1; node <= 12; ++node) {
    for (int t = 0; t < kNumTiers; ++t) {
      uint64_t expect = 0;
      for (auto& [k, codes] : model)
        expect += codes.count(Loc(node, static_cast<TierKind>(t)).Code());
      EXPECT_EQ(r.CountOn(node, static_cast<TierKind>(t)), expect);
      EXPECT_EQ(r.Inventory(node, static_cast<TierKind>(t)).size(), expect);
    }
  }
}

}  // namespace
}  // namespace pikv::controller
