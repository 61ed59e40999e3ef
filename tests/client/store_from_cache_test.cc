// Client::StoreFromCache: a chunk gathered by slots straight out of an
// engine's paged cache, stored on a real node, fetched back and remapped at
// the position it was computed at gives the same bits; a cache that is not
// the client's namespace, or slots that do not match the tokens, are refused
// before anything is stored.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "pikv/client/client.h"
#include "pikv/client/prompt.h"
#include "small_namespace.h"
#include "test_support.h"

namespace pikv::client {
namespace {

struct Cache {
  device::PagedLayout layout;
  std::vector<std::vector<uint8_t>> memory;
  Cache(DType dtype, uint32_t layers, uint32_t heads, uint32_t dim, uint64_t blocks, uint8_t fill) {
    layout = device::PagedLayout::Make(device::PagedLayout::Order::kFlash, dtype,
                                       KvFormat::kStandard, heads, dim, 16, blocks);
    std::mt19937 rng(fill);
    for (uint32_t l = 0; l < layers; ++l) {
      memory.emplace_back(layout.ElementsPerLayer() * DTypeSize(dtype));
      for (size_t i = 0; i < memory.back().size(); ++i)
        memory.back()[i] = fill ? ((i % 2) ? uint8_t(0x3c) : uint8_t(rng())) : 0;
      layout.layers.push_back(memory.back().data());
    }
  }
};

TEST(StoreFromCacheTest, GatheredStoredFetchedAndRemappedBackIsBitExact) {
  testing::TempDir dir;
  auto node = testing::StartNode({"--endpoint", "ipc://" + dir.str() + "/n.sock", "--data-dir",
                                  dir.str(), "--controller", "", "--log-level", "error"});
  Client client(SmallNamespace(node.ipc));
  Cache engine(DType::kBF16, 2, 2, 64, 4, 7), other(DType::kBF16, 2, 2, 64, 4, 0);
  std::vector<int32_t> tokens = {5, 6, 7, 8, 9, 10, 11};
  std::vector<int64_t> slots = {17, 3, 40, 41, 8, 0, 63};  // out of order, across blocks
  ASSERT_TRUE(
      client.StoreFromCache(client.KeyOf(tokens), tokens, engine.layout, slots, 0).get().ok());
  ASSERT_TRUE(
      client.StoreFromCache(client.KeyOf(tokens), tokens, engine.layout, slots, 0, /*async=*/true)
          .get()
          .ok());

  auto plan = client.MakePlan(*FromSegments({tokens, {1}}));
  ASSERT_EQ(plan.chunks[0].source, Source::kLocal);
  auto objects = client.Fetch(plan);
  ASSERT_TRUE(objects[0].ok()) << objects[0].status().ToString();
  ASSERT_TRUE(client.Remap(*objects[0], plan.chunks[0], slots, other.layout).ok());
  for (uint32_t l = 0; l < 2; ++l)
    for (uint32_t plane = 0; plane < 2; ++plane)
      for (int64_t slot : slots)
        for (uint32_t h = 0; h < 2; ++h)
          ASSERT_EQ(0, std::memcmp(engine.layout.HeadVector(l, plane, slot, h),
                                   other.layout.HeadVector(l, plane, slot, h), 64 * 2))
              << "layer " << l << " plane " << plane << " slot " << slot;
  EXPECT_EQ(client.Stats().stores, 2u);
}

TEST(StoreFromCacheTest, ACacheOutsideTheNamespaceOrSlotsThatDoNotMatchAreRefused) {
  Client client(SmallNamespace(""));  // no node: refusals come first anyway
  std::vector<int32_t> tokens = {1, 2, 3};
  std::vector<int64_t> slots = {0, 1, 2};
  Cache f16(DType::kF16, 2, 2, 64, 1, 1), three_layers(DType::kBF16, 3, 2, 64, 1, 1),
      right(DType::kBF16, 2, 2, 64, 1, 1);
  auto code = [&](const Cache& c, std::vector<int64_t> s) {
    return client.StoreFromCache(client.KeyOf(tokens), tokens, c.layout, s, 0).get().code();
  };
  EXPECT_EQ(code(f16, slots), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(three_layers, slots), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(right, {0, 1}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(right, {0, 1, 99}), ErrorCode::kInvalidArgument) << "a slot past the cache";
  EXPECT_EQ(code(right, slots), ErrorCode::kUnavailable) << "valid, but no node to store into";
  EXPECT_EQ(client.Stats().store_failures, 5u);
}

}  // namespace
}  // namespace pikv::client
