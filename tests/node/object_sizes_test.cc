// Every size of chunk object, 1 KiB to 1 GiB (less 1 MiB: a node takes
// objects of 1 GiB at most, header included),
// byte-identical through every path pikv moves objects by: a zero-copy
// commit into node A, a copying get from A, a lease from A, a streamed P2P
// pull into node B, a copying put into B and get from it over tcp, the same
// in 1 MiB frames (streamed puts and gets), and the
// Redis tier (in parts past 256 MiB) written through by A. Real processes, a real redis-server.
// Under the sanitizers (many times slower, with shadow memory) sizes stop at 64 MiB. A client may
// hold half of a node's arena: 2300 MiB lets it reserve the largest.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "pikv/proto/chunk_object.h"
#include "pikv/rpc/admin_client.h"
#include "pikv/rpc/node_client.h"
#include "pikv/rpc/zero_copy_client.h"
#include "pikv/storage/remote_tier.h"
#include "test_support.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define PIKV_SANITIZED 1
#endif
#endif

namespace pikv::node {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTimeout = std::chrono::seconds(60);

bool Same(const SharedBuffer& a, const SharedBuffer& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

TEST(ObjectSizesTest, EverySizeIsByteIdenticalThroughEveryPath) {
  std::vector<size_t> sizes = {1 << 10, (64 << 10) + 1, (1 << 20) + 17, (64 << 20) + 3};
#ifndef PIKV_SANITIZED
  sizes.insert(sizes.end(), {(300u << 20) + 5, (1u << 30) - (1u << 20)});
#endif
  testing::RedisServer redis;
  testing::TempDir dir_a, dir_b;
  auto controller = testing::StartController(
      {"--endpoint", "tcp://127.0.0.1:*", "--http", "", "--log-level", "error"});
  auto start = [&](testing::TempDir& d, const std::string& id) {
    return testing::StartClusterNode(d, id, controller.endpoint,
                                     {"--cpu-capacity", "2300MiB", "--redis", redis.address()});
  };
  auto a = start(dir_a, "a"), b = start(dir_b, "b");
  rpc::NodeClient node_a(a.tcp, kTimeout), node_b(b.tcp, kTimeout), framed_b(b.tcp, kTimeout);
  framed_b.set_stream_frame(1 << 20);
  rpc::AdminClient admin(controller.endpoint, kTimeout);
  auto zc = rpc::ZeroCopyClient::Connect(a.ipc.substr(6) + ".zc", kTimeout);
  ASSERT_TRUE(zc.ok()) << zc.status().ToString();
  auto redis_options = storage::ParseRedisAddress(redis.address());
  ASSERT_TRUE(redis_options.ok());
  redis_options->io_timeout = kTimeout;
  storage::RemoteTier shared(*redis_options, nullptr);

  for (size_t size : sizes) {
    SCOPED_TRACE("object of " + std::to_string(size) + " bytes");
    auto object = testing::MakeObject(size, size);
    const ChunkKey& key = object.key;
    // Into A without a copy.
    {
      auto space = (*zc)->Reserve(object.bytes.size(), kTimeout);
      ASSERT_TRUE(space.ok()) << space.status().ToString();
      std::memcpy(space->bytes().data(), object.bytes.data(), object.bytes.size());
      Status committed = (*zc)->Commit(key, std::move(*space), kTimeout);
      ASSERT_TRUE(committed.ok()) << committed.ToString();
    }
    // Out of A by copy and in place.
    auto copied = node_a.Get({&key, 1});
    ASSERT_TRUE(copied.ok() && (*copied)[0].ok());
    EXPECT_TRUE(Same(*(*copied)[0], object.bytes));
    copied = Status::Ok();
    {
      auto leased = (*zc)->Lease({&key, 1}, kTimeout);
      ASSERT_TRUE(leased.ok() && leased->objects[0].ok());
      EXPECT_TRUE(Same(*leased->objects[0], object.bytes));
    }
    // Pulled into B, streamed.
    for (auto end = Clock::now() + kTimeout; Clock::now() < end;) {
      auto where = admin.Locate({key});  // A's own copy: a pull never takes Redis's
      if (where.ok() && std::any_of((*where)[0].begin(), (*where)[0].end(), [](const auto& c) {
            return c.location.tier == TierKind::kCpu;
          }))
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    auto pulled = node_b.Pull({&key, 1}, a.tcp, kTimeout);
    ASSERT_TRUE(pulled.ok() && (*pulled)[0].ok())
        << (pulled.ok() ? (*pulled)[0].status() : pulled.status()).ToString();
    EXPECT_TRUE(Same(*(*pulled)[0], object.bytes));
    pulled = Status::Ok();
    // Into B by a copying put over tcp, out again by copy.
    ASSERT_TRUE(node_b.Delete({&key, 1}).ok());
    auto put = node_b.Put({&key, 1}, {&object.bytes, 1});
    ASSERT_TRUE(put.ok() && (*put)[0].ok());
    copied = node_b.Get({&key, 1});
    ASSERT_TRUE(copied.ok() && (*copied)[0].ok());
    EXPECT_TRUE(Same(*(*copied)[0], object.bytes));
    copied = Status::Ok();
    // Into B and out again in 1 MiB frames over tcp.
    ASSERT_TRUE(node_b.Delete({&key, 1}).ok());
    put = framed_b.Put({&key, 1}, {&object.bytes, 1});
    ASSERT_TRUE(put.ok() && (*put)[0].ok());
    copied = framed_b.Get({&key, 1});
    ASSERT_TRUE(copied.ok() && (*copied)[0].ok());
    EXPECT_TRUE(Same(*(*copied)[0], object.bytes));
    copied = Status::Ok();
    // Written through to Redis by A (in parts past 256 MiB).
    Result<SharedBuffer> from_redis = NotFound();
    for (auto end = Clock::now() + kTimeout; Clock::now() < end && !from_redis.ok();) {
      from_redis = shared.Get(key);
      if (!from_redis.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(from_redis.ok()) << from_redis.status().ToString();
    EXPECT_TRUE(Same(*from_redis, object.bytes));
    // Into A again as a client store writes it: unsealed, marked written
    // piece by piece, sealed by the node (hashed ahead as the marks came).
    ASSERT_TRUE(node_a.Delete({&key, 1}).ok());
    {
      const size_t n = object.bytes.size();
      auto space = (*zc)->Reserve(n, kTimeout);
      ASSERT_TRUE(space.ok()) << space.status().ToString();
      std::memcpy(space->bytes().data(), object.bytes.data(), n);
      auto header = ParseChunkHeader(object.bytes.span());
      ASSERT_TRUE(header.ok() && WriteChunkHeader(*header, 0, space->bytes()).ok());
      for (size_t done = kWrittenStep; done < n; done += kWrittenStep) space->Written(done);
      space->Written(n);
      Status committed = (*zc)->Commit(key, std::move(*space), kTimeout, /*seal=*/true);
      ASSERT_TRUE(committed.ok()) << committed.ToString();
      auto leased = (*zc)->Lease({&key, 1}, kTimeout);
      ASSERT_TRUE(leased.ok() && leased->objects[0].ok());
      EXPECT_TRUE(Same(*leased->objects[0], object.bytes));
    }
    // Room for the next size.
    ASSERT_TRUE(node_a.Delete({&key, 1}).ok());
    (void)node_b.Delete({&key, 1});
  }
  auto stats_a = node_a.Stats();
  ASSERT_TRUE(stats_a.ok());
  EXPECT_EQ(FieldInt(*stats_a, "zero_copy.sealed_ahead", 0), int64_t(sizes.size()));
  auto streamed = node_b.Stats();
  ASSERT_TRUE(streamed.ok());
  // Objects up to kWholeObjectBytes travel whole, pulled or put.
  const auto in_frames = std::count_if(sizes.begin(), sizes.end(), [](size_t s) {
    return s > std::max<uint64_t>(1 << 20, kWholeObjectBytes);
  });
  EXPECT_EQ(FieldInt(*streamed, "p2p.pulled_streamed", 0), in_frames);
  EXPECT_EQ(FieldInt(*streamed, "streamed_puts.completed", 0), in_frames);
}

}  // namespace
}  // namespace pikv::node
