// The client on its node's zero-copy channel: fetches are views into the
// node's arena that remap to the same bits as copies do, stores land in
// place and read back identically by copy, a view past its lease is refused,
// and a node without the channel (or a client told not to use it) copies.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "../../bench/filled_cache.h"
#include "pikv/client/client.h"
#include "pikv/client/prompt.h"
#include "small_namespace.h"
#include "test_support.h"

namespace pikv::client {
namespace {

testing::NodeProcess StartNode(const testing::TempDir& dir, const std::string& ttl = "30s") {
  return testing::StartNode({"--endpoint", "ipc://" + dir.str() + "/n.sock", "--data-dir",
                             dir.str(), "--controller", "", "--lease-ttl", ttl, "--log-level",
                             "error"});
}

// Stores a 40-token chunk gathered from `source`, fetches it with `reader`
// and remaps it at position 7 into `dest`.
Status RoundTrip(Client& writer, Client& reader, const bench::FilledCache& source,
                 bench::FilledCache& dest) {
  std::vector<int32_t> tokens(40);
  for (int i = 0; i < 40; ++i) tokens[i] = 300 + i;
  std::vector<int64_t> slots(40);
  for (int i = 0; i < 40; ++i) slots[i] = i;
  if (Status s = writer.StoreFromCache(writer.KeyOf(tokens), tokens, source.layout, slots, 0).get();
      !s.ok())
    return s;
  std::vector<int32_t> head(7, 1);
  auto plan = reader.MakePlan(*FromSegments({head, tokens, {2}}));
  if (plan.chunks[1].source != Source::kLocal) return NotFound("not planned local");
  auto objects = reader.Fetch(plan);
  if (!objects[1].ok()) return objects[1].status();
  std::vector<int64_t> at(40);
  for (int i = 0; i < 40; ++i) at[i] = 64 + i;
  return reader.Remap(*objects[1], plan.chunks[1], at, dest.layout);
}

TEST(ZeroCopyClientTest, InPlaceAndCopiedPathsGiveTheSameBits) {
  testing::TempDir dir;
  auto node = StartNode(dir);
  Client in_place(SmallNamespace(node.ipc, true)), copying(SmallNamespace(node.ipc, false));
  bench::FilledCache source(in_place.options(), 128), via_zc(in_place.options(), 128),
      via_copy(in_place.options(), 128);
  ASSERT_TRUE(RoundTrip(in_place, in_place, source, via_zc).ok());
  ASSERT_TRUE(RoundTrip(in_place, copying, source, via_copy).ok());
  EXPECT_EQ(in_place.Stats().zero_copy_stores, 2u);  // it wrote both
  EXPECT_EQ(in_place.Stats().zero_copy_fetched, 1u);
  EXPECT_EQ(copying.Stats().zero_copy_fetched, 0u);
  EXPECT_EQ(copying.Stats().fetched, 1u);
  EXPECT_EQ(via_zc.memory, via_copy.memory);
  EXPECT_NE(via_zc.memory, bench::FilledCache(in_place.options(), 128).memory);
  // A copying writer's object is served in place to the other.
  bench::FilledCache again(in_place.options(), 128);
  ASSERT_TRUE(RoundTrip(copying, in_place, source, again).ok());
  EXPECT_EQ(copying.Stats().zero_copy_stores, 0u);
  EXPECT_EQ(again.memory, via_copy.memory);
}

TEST(ZeroCopyClientTest, AViewPastItsLeaseIsRefused) {
  testing::TempDir dir;
  auto node = StartNode(dir, "200ms");
  Client client(SmallNamespace(node.ipc, true));
  bench::FilledCache source(client.options(), 64), dest(client.options(), 64);
  std::vector<int32_t> tokens = {9, 8, 7, 6};
  std::vector<int64_t> slots = {0, 1, 2, 3};
  ASSERT_TRUE(
      client.StoreFromCache(client.KeyOf(tokens), tokens, source.layout, slots, 0).get().ok());
  auto plan = client.MakePlan(*FromSegments({tokens, {2}}));
  auto objects = client.Fetch(plan);
  ASSERT_TRUE(objects[0].ok());
  ASSERT_NE(plan.chunks[0].lease_deadline, std::chrono::steady_clock::time_point{});
  ASSERT_TRUE(client.Remap(*objects[0], plan.chunks[0], slots, dest.layout).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(client.Remap(*objects[0], plan.chunks[0], slots, dest.layout).code(),
            ErrorCode::kTimeout);
  EXPECT_EQ(client.Stats().lease_expired, 1u);
  // Fetched again, it is good again.
  objects = client.Fetch(plan);
  ASSERT_TRUE(objects[0].ok());
  EXPECT_TRUE(client.Remap(*objects[0], plan.chunks[0], slots, dest.layout).ok());
}

TEST(ZeroCopyClientTest, ANodeWithoutTheChannelIsServedByCopy) {
  testing::TempDir dir;
  auto node =
      testing::StartNode({"--endpoint", "ipc://" + dir.str() + "/n.sock", "--data-dir", dir.str(),
                          "--controller", "", "--zero-copy", "false", "--log-level", "error"});
  Client client(SmallNamespace(node.ipc, true));
  bench::FilledCache source(client.options(), 128), dest(client.options(), 128);
  ASSERT_TRUE(RoundTrip(client, client, source, dest).ok());
  EXPECT_EQ(client.Stats().zero_copy_stores, 0u);
  EXPECT_EQ(client.Stats().zero_copy_fetched, 0u);
  EXPECT_EQ(client.Stats().fetched, 1u);
}

}  // namespace
}  // namespace pikv::client
