#include "pikv/storage/remote_tier.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <cstring>
#include <thread>

#include "../../storage/src/redis_parts.h"
#include "test_support.h"

namespace pikv::storage {
namespace {

using testing::MakeObject;
using testing::RedisServer;

class RemoteTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!RedisServer::Available())
      GTEST_FAIL() << "redis-server is not installed (scripts/install-deps.sh)";
    redis_ = std::make_unique<RedisServer>();
    RemoteTierOptions o;
    o.port = redis_->port();
    o.key_namespace = "t";
    o.io_timeout = std::chrono::milliseconds(500);
    o.breaker = {2, std::chrono::milliseconds(100), std::chrono::milliseconds(400)};
    tier_ = std::make_unique<RemoteTier>(o, nullptr);
  }
  // Runs one command on a fresh connection to the test Redis.
  redisReply* Raw(const std::vector<std::string>& args) {
    redisContext* c = redisConnect("127.0.0.1", redis_->port());
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
    redisFree(c);
    return r;
  }

  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<RemoteTier> tier_;
};

TEST_F(RemoteTierTest, PutGetUnderNamespacedKey) {
  auto o = MakeObject(1, 1 << 20);
  ASSERT_TRUE(tier_->Put(o.key, o.bytes).ok());
  auto r = tier_->Get(o.key);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(std::equal(r->data(), r->data() + r->size(), o.bytes.data(),
                         o.bytes.data() + o.bytes.size()));
  redisReply* raw = Raw({"EXISTS", "pikv:t:" + o.key.Hex()});
  EXPECT_EQ(raw->integer, 1);
  freeReplyObject(raw);
  EXPECT_EQ(tier_->Get(MakeObject(2, 1024).key).code(), ErrorCode::kNotFound);
}

// The remote tier's size is the server's: used_memory and maxmemory, read
// after each write and delete.
TEST_F(RemoteTierTest, StatsReportTheServersMemoryAfterWritesAndDeletes) {
  freeReplyObject(Raw({"CONFIG", "SET", "maxmemory", "64mb"}));
  EXPECT_EQ(tier_->Stats().used_bytes, 0u) << "nothing written yet";
  auto o = MakeObject(1, 4 << 20);
  ASSERT_TRUE(tier_->Put(o.key, o.bytes).ok());
  const TierStats full = tier_->Stats();
  EXPECT_EQ(full.capacity_bytes, 64u << 20);
  EXPECT_GT(full.used_bytes, uint64_t{4} << 20);
  ASSERT_TRUE(tier_->Remove(o.key).ok());
  EXPECT_LT(tier_->Stats().used_bytes, full.used_bytes - (uint64_t{3} << 20));
}

TEST_F(RemoteTierTest, BatchesArePipelined) {
  std::vector<ChunkKey> keys;
  std::vector<SharedBuffer> objs;
  for (uint64_t i = 0; i < 20; ++i) {
    auto o = MakeObject(i, 2048);
    keys.push_back(o.key);
    objs.push_back(o.bytes);
  }
  for (const Status& s : tier_->PutMany(keys, objs)) EXPECT_TRUE(s.ok());
  keys.push_back(MakeObject(99, 1024).key);
  auto got = tier_->GetMany(keys);
  ASSERT_EQ(got.size(), 21u);
  for (size_t i = 0; i < 20; ++i) EXPECT_TRUE(got[i].ok());
  EXPECT_EQ(got[20].code(), ErrorCode::kNotFound);
  auto has = tier_->ContainsMany(keys);
  EXPECT_EQ(std::count(has.begin(), has.end(), true), 20);
}

TEST_F(RemoteTierTest, TtlIsApplied) {
  RemoteTierOptions o;
  o.port = redis_->port();
  o.ttl_seconds = 100;
  RemoteTier ttl_tier(o, nullptr);
  auto obj = MakeObject(3, 1024);
  ASSERT_TRUE(ttl_tier.Put(obj.key, obj.bytes).ok());
  redisReply* r = Raw({"TTL", ttl_tier.RedisKey(obj.key)});
  EXPECT_GT(r->integer, 0);
  EXPECT_LE(r->integer, 100);
  freeReplyObject(r);
}

// A value whose bytes do not verify, or a well-formed object filed under a
// key its content does not hash to (here: another chunk's tokens): a miss,
// counted, and deleted.
TEST_F(RemoteTierTest, ACorruptOrPoisonedValueIsAMissAndDeleted) {
  auto o = MakeObject(4, 4096);
  std::string corrupt(reinterpret_cast<const char*>(o.bytes.data()), o.bytes.size());
  corrupt[corrupt.size() - 1] ^= 0x10;
  SharedBuffer poisoned = testing::Rebuilt(o.bytes.span(), [](ChunkHeader& h) { h.tokens[0]++; });
  const std::string bad_values[] = {
      corrupt, std::string(reinterpret_cast<const char*>(poisoned.data()), poisoned.size())};
  for (const std::string& bad : bad_values) {
    freeReplyObject(Raw({"SET", tier_->RedisKey(o.key), bad}));
    EXPECT_EQ(tier_->Get(o.key).code(), ErrorCode::kNotFound);
    redisReply* r = Raw({"EXISTS", tier_->RedisKey(o.key)});
    EXPECT_EQ(r->integer, 0);
    freeReplyObject(r);
  }
  EXPECT_EQ(tier_->Stats().corruptions, 2u);
}

// A Redis that requires a password serves a tier that sends the right one;
// a wrong or missing one is a clear error (the tier degrades, nothing
// crashes), and no error message repeats the password that was sent.
TEST_F(RemoteTierTest, APasswordProtectedRedisServesOnlyTheRightPassword) {
  freeReplyObject(Raw({"CONFIG", "SET", "requirepass", "right pass"}));
  auto o = MakeObject(6, 4096);
  RemoteTierOptions opt;
  opt.port = redis_->port();
  opt.key_namespace = "t";
  opt.io_timeout = std::chrono::milliseconds(500);
  opt.password = "right pass";
  RemoteTier right(opt, nullptr);
  ASSERT_TRUE(right.Put(o.key, o.bytes).ok());
  auto got = right.Get(o.key);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->size(), o.bytes.size());

  opt.password = "pw-never-echoed";
  RemoteTier wrong(opt, nullptr);
  Status s = wrong.Put(o.key, o.bytes);
  EXPECT_EQ(s.code(), ErrorCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("refused the password"), std::string::npos) << s.ToString();
  EXPECT_EQ(s.message().find("pw-never-echoed"), std::string::npos) << s.ToString();
  EXPECT_FALSE(wrong.Get(o.key).ok());

  opt.password.clear();
  RemoteTier none(opt, nullptr);
  EXPECT_FALSE(none.Put(o.key, o.bytes).ok());
  EXPECT_FALSE(none.Get(o.key).ok());
}

// The remote tier's registry entry is cleared by whichever node's delete
// runs: a node that finds the key already gone (another node deleted it, or
// Redis dropped it) still reports it absent, or a stale "in Redis" entry that
// an earlier admit report left behind would outlive every later evict.
TEST_F(RemoteTierTest, RemovingAKeyAlreadyGoneStillReportsItEvicted) {
  std::vector<TierEvent> events;
  RemoteTierOptions o;
  o.port = redis_->port();
  o.key_namespace = "t";
  o.io_timeout = std::chrono::milliseconds(300);
  RemoteTier tier(
      o, [&](std::span<const TierEvent> e) { events.insert(events.end(), e.begin(), e.end()); });
  auto obj = MakeObject(5, 2048);
  ASSERT_TRUE(tier.Put(obj.key, obj.bytes).ok());
  freeReplyObject(Raw({"DEL", tier.RedisKey(obj.key)}));  // someone else's delete
  events.clear();
  EXPECT_EQ(tier.Remove(obj.key).code(), ErrorCode::kNotFound);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, EventKind::kEvict);
  EXPECT_EQ(events[0].key, obj.key);
  EXPECT_EQ(tier.Stats().evictions, 0u) << "nothing was deleted here";

  redis_->Pause();  // no answer: nothing is known, nothing is reported
  events.clear();
  EXPECT_FALSE(tier.Remove(obj.key).ok());
  redis_->Resume();
  EXPECT_TRUE(events.empty());
}

// Objects over the part size (Redis's bulk limit in production) are stored as
// parts behind a manifest and read back whole.
class RemoteTierPartsTest : public RemoteTierTest {
 protected:
  std::unique_ptr<RemoteTier> Parted(uint64_t part_bytes, uint32_t ttl = 0) {
    RemoteTierOptions o;
    o.port = redis_->port();
    o.key_namespace = "t";
    o.part_bytes = part_bytes;
    o.ttl_seconds = ttl;
    return std::make_unique<RemoteTier>(o, nullptr);
  }
  long long Integer(const std::vector<std::string>& args) {
    redisReply* r = Raw(args);
    const long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -99;
    freeReplyObject(r);
    return v;
  }
  size_t Keys(const std::string& pattern) {
    redisReply* r = Raw({"KEYS", pattern});
    const size_t n = r->elements;
    freeReplyObject(r);
    return n;
  }
};

TEST_F(RemoteTierPartsTest, AnObjectOverTheServersBulkLimitIsStoredAsPartsAndReadWhole) {
  freeReplyObject(Raw({"CONFIG", "SET", "proto-max-bulk-len", "1mb"}));
  auto o = MakeObject(21, (5 << 20) / 2);  // 2.5 MiB: over the 1 MiB limit
  auto whole = Parted(8 << 20);            // a part size over the limit: one SET, refused
  EXPECT_FALSE(whole->Put(o.key, o.bytes).ok());
  EXPECT_FALSE(whole->Get(o.key).ok());
  const uint32_t parts = (o.bytes.size() + (512 << 10) - 1) / (512 << 10);  // the header adds one

  auto tier = Parted(512 << 10);
  ASSERT_TRUE(tier->Put(o.key, o.bytes).ok());
  redisReply* manifest = Raw({"GET", tier->RedisKey(o.key)});
  ASSERT_EQ(manifest->type, REDIS_REPLY_STRING);
  auto m = ParseManifest({manifest->str, manifest->len});
  freeReplyObject(manifest);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->parts, parts);
  EXPECT_EQ(Keys(tier->RedisKey(o.key) + ":part:*"), parts);
  EXPECT_EQ(Integer({"TTL", PartKey(tier->RedisKey(o.key), *m, 0)}), -1) << "committed: no expiry";
  auto got = tier->Get(o.key);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), o.bytes.size());
  EXPECT_EQ(std::memcmp(got->data(), o.bytes.data(), o.bytes.size()), 0);
  EXPECT_TRUE(tier->Contains(o.key));
  ASSERT_TRUE(tier->Remove(o.key).ok());
  EXPECT_EQ(Keys(tier->RedisKey(o.key) + "*"), 0u) << "the parts go with the manifest";
}

// Values past the size whose memory is mapped up front, whole and in parts
// whose last is short, with a batch of small ones pipelined behind: each
// comes back byte for byte, and a value of the wrong size is a miss.
// GetManyPlaced reads an object of at least kPlacedMinBytes, whole or in
// parts, into the memory the caller gives for it, and verifies it there; a
// smaller one, or one the caller gives no memory for, comes in memory of the
// tier's own; what fails its checks in the caller's memory is not served.
TEST_F(RemoteTierPartsTest, GetManyPlacedReadsLargeObjectsIntoTheCallersMemory) {
  auto big = MakeObject(41, 3 << 20), small = MakeObject(42, 16 << 10),
       unplaced = MakeObject(43, 1 << 20);
  for (uint64_t part_bytes : {uint64_t{64} << 20, uint64_t{1} << 20}) {
    SCOPED_TRACE(part_bytes);
    auto tier = Parted(part_bytes);
    const std::vector<testing::TestObject> objects = {big, small, unplaced};
    std::vector<ChunkKey> keys;
    std::vector<SharedBuffer> bytes;
    for (const auto& o : objects) keys.push_back(o.key), bytes.push_back(o.bytes);
    for (const Status& s : tier->PutMany(keys, bytes)) ASSERT_TRUE(s.ok()) << s.ToString();
    std::vector<uint8_t> place(big.bytes.size());
    std::vector<std::pair<size_t, uint64_t>> asked;
    auto got = tier->GetManyPlaced(keys, [&](size_t i, uint64_t size) {
      asked.emplace_back(i, size);
      return i == 0 ? std::span<uint8_t>(place) : std::span<uint8_t>{};
    });
    const std::vector<std::pair<size_t, uint64_t>> expected = {{0, big.bytes.size()},
                                                               {2, unplaced.bytes.size()}};
    EXPECT_EQ(asked, expected) << "asked once per object of 64 KiB or more, never for a manifest";
    for (size_t i = 0; i < objects.size(); ++i) {
      ASSERT_TRUE(got[i].ok()) << i << ": " << got[i].status().ToString();
      ASSERT_EQ(got[i]->size(), objects[i].bytes.size());
      EXPECT_EQ(std::memcmp(got[i]->data(), objects[i].bytes.data(), got[i]->size()), 0) << i;
    }
    EXPECT_EQ(got[0]->data(), place.data());
    EXPECT_NE(got[2]->data(), place.data());
    // Rewritten behind the tier's back: read into place, then refused.
    const std::string name = tier->RedisKey(big.key);
    std::string corrupt(reinterpret_cast<const char*>(big.bytes.data()), big.bytes.size());
    corrupt[corrupt.size() - 1] ^= 0x10;
    if (part_bytes > big.bytes.size()) {
      freeReplyObject(Raw({"SET", name, corrupt}));
      EXPECT_EQ(tier->GetManyPlaced({&big.key, 1},
                                    [&](size_t, uint64_t) { return std::span<uint8_t>(place); })[0]
                    .code(),
                ErrorCode::kNotFound);
      EXPECT_EQ(tier->Stats().corruptions, 1u);
    }
    for (const auto& k : keys) tier->Remove(k).IgnoreError();
  }
}

TEST_F(RemoteTierPartsTest, LargeValuesComeBackExactlyWholeAndInParts) {
  auto big = MakeObject(31, 20 << 20);
  for (uint64_t part_bytes : {uint64_t{64} << 20, uint64_t{7} << 20}) {
    SCOPED_TRACE(part_bytes);
    auto tier = Parted(part_bytes);
    std::vector<testing::TestObject> objects = {big, MakeObject(32, 4096), MakeObject(33, 8192)};
    std::vector<ChunkKey> keys;
    std::vector<SharedBuffer> bytes;
    for (const auto& o : objects) keys.push_back(o.key), bytes.push_back(o.bytes);
    for (const Status& s : tier->PutMany(keys, bytes)) ASSERT_TRUE(s.ok()) << s.ToString();
    auto got = tier->GetMany(keys);
    for (size_t i = 0; i < objects.size(); ++i) {
      ASSERT_TRUE(got[i].ok()) << i << ": " << got[i].status().ToString();
      ASSERT_EQ(got[i]->size(), objects[i].bytes.size());
      EXPECT_EQ(std::memcmp(got[i]->data(), objects[i].bytes.data(), got[i]->size()), 0) << i;
    }
    ASSERT_TRUE(tier->Remove(big.key).ok());
  }
  // A part of the wrong length (rewritten behind the tier's back) is a miss.
  auto tier = Parted(7 << 20);
  ASSERT_TRUE(tier->Put(big.key, big.bytes).ok());
  redisReply* manifest = Raw({"GET", tier->RedisKey(big.key)});
  auto m = ParseManifest({manifest->str, manifest->len});
  freeReplyObject(manifest);
  ASSERT_TRUE(m.has_value());
  freeReplyObject(Raw({"SET", PartKey(tier->RedisKey(big.key), *m, 1), "short"}));
  EXPECT_FALSE(tier->Get(big.key).ok());
  EXPECT_FALSE(tier->Contains(big.key)) << "the broken object is deleted";
}

TEST_F(RemoteTierPartsTest, PartsTakeTheTiersExpiry) {
  auto tier = Parted(1 << 20, 100);
  auto o = MakeObject(22, 3 << 20);
  ASSERT_TRUE(tier->Put(o.key, o.bytes).ok());
  EXPECT_GT(Integer({"TTL", tier->RedisKey(o.key)}), 0);
  redisReply* r = Raw({"KEYS", tier->RedisKey(o.key) + ":part:*"});
  ASSERT_EQ(r->elements, (o.bytes.size() + (1 << 20) - 1) >> 20);
  for (size_t i = 0; i < r->elements; ++i) {
    const long long ttl = Integer({"TTL", r->element[i]->str});
    EXPECT_GT(ttl, 0);
    EXPECT_LE(ttl, 100);
  }
  freeReplyObject(r);
}

TEST_F(RemoteTierPartsTest, AMissingPartIsAMissAndTheRestIsDeleted) {
  auto tier = Parted(1 << 20);
  auto o = MakeObject(23, 3 << 20);
  ASSERT_TRUE(tier->Put(o.key, o.bytes).ok());
  redisReply* parts = Raw({"KEYS", tier->RedisKey(o.key) + ":part:*"});
  ASSERT_EQ(parts->elements, (o.bytes.size() + (1 << 20) - 1) >> 20);
  freeReplyObject(Raw({"DEL", parts->element[1]->str}));  // Redis evicted one part
  freeReplyObject(parts);
  EXPECT_EQ(tier->Get(o.key).code(), ErrorCode::kNotFound);
  EXPECT_EQ(Keys(tier->RedisKey(o.key) + "*"), 0u);
  EXPECT_FALSE(tier->Contains(o.key));
}

TEST_F(RemoteTierPartsTest, PartsWithoutTheirManifestAreInvisible) {
  // What a writer cut before its MULTI/EXEC leaves: parts with the orphan expiry.
  auto tier = Parted(1 << 20);
  auto o = MakeObject(24, 2 << 20);
  PartsManifest m{0x1234, o.bytes.size(), 1 << 20, 2};
  for (uint32_t i = 0; i < 2; ++i) {
    std::string slice(reinterpret_cast<const char*>(o.bytes.data()) + i * (1 << 20), 1 << 20);
    freeReplyObject(Raw({"SET", PartKey(tier->RedisKey(o.key), m, i), slice, "EX", "3600"}));
  }
  EXPECT_EQ(tier->Get(o.key).code(), ErrorCode::kNotFound);
  EXPECT_FALSE(tier->Contains(o.key));
}

TEST(RedisPartsTest, ManifestsAreParsedStrictly) {
  PartsManifest m{0xabcdef, 10, 4, 3};
  auto back = ParseManifest(EncodeManifest(m));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->generation, m.generation);
  EXPECT_EQ(back->parts, 3u);
  for (std::string bad :
       {"PIKVPART 1 10 4 2", "PIKVPART 1 10 0 3", "PIKVPART 1 0 4 0", "PIKVPART 1 10 4 3 ",
        "PIKVPART x 10 4 3", "PIKVPART 1 10 4", "PIKVCHNK 1 10 4 3",
        "PIKVPART 1 2000000000000 1 2000000000000", "PIKVPART 1 -10 4 3"}) {
    EXPECT_FALSE(ParseManifest(bad).has_value()) << bad;
  }
}

TEST_F(RemoteTierTest, SurvivesRedisDeathAndRecoversWhenItReturns) {
  auto o = MakeObject(5, 4096);
  ASSERT_TRUE(tier_->Put(o.key, o.bytes).ok());
  redis_->Kill();
  // Fails (not hangs), counts errors, then the breaker opens and fails fast.
  EXPECT_EQ(tier_->Get(o.key).code(), ErrorCode::kUnavailable);
  EXPECT_EQ(tier_->Put(o.key, o.bytes).code(), ErrorCode::kUnavailable);
  EXPECT_EQ(tier_->breaker_state(), CircuitBreaker::State::kOpen);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(tier_->Get(o.key).code(), ErrorCode::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));
  EXPECT_GE(tier_->Stats().errors, 2u);
  EXPECT_GE(tier_->unavailable(), 1u);

  redis_->Start();  // empty again: nothing was persisted
  // The same tier object reconnects after its backoff.
  bool recovered = false;
  for (int i = 0; i < 100 && !recovered; ++i) {
    recovered = tier_->Put(o.key, o.bytes).ok();
    if (!recovered) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(recovered);
  EXPECT_EQ(tier_->breaker_state(), CircuitBreaker::State::kClosed);
  EXPECT_TRUE(tier_->Get(o.key).ok());
}

TEST(RedisAddressTest, Parses) {
  auto a = ParseRedisAddress("redis://10.0.0.1:6380");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "10.0.0.1");
  EXPECT_EQ(a->port, 6380);
  EXPECT_EQ(ParseRedisAddress("localhost")->port, 6379);
  EXPECT_FALSE(ParseRedisAddress("host:notaport").ok());
  EXPECT_FALSE(ParseRedisAddress(":6379").ok());
}

TEST(CircuitBreakerTest, OpensHalfOpensAndBacksOff) {
  using namespace std::chrono_literals;
  CircuitBreaker b({2, 100ms, 300ms});
  auto t = CircuitBreaker::Clock::now();
  EXPECT_TRUE(b.Allow(t));
  b.OnFailure(t);
  EXPECT_EQ(b.state(), CircuitBreaker::State::kClosed);
  b.OnFailure(t);
  EXPECT_EQ(b.state(), CircuitBreaker::State::kOpen);
  EXPECT_FALSE(b.Allow(t + 99ms));
  EXPECT_TRUE(b.Allow(t + 100ms));   // one trial
  EXPECT_FALSE(b.Allow(t + 100ms));  // only one
  b.OnFailure(t + 100ms);            // trial failed: cooldown doubles to 200ms
  EXPECT_FALSE(b.Allow(t + 299ms));
  EXPECT_TRUE(b.Allow(t + 300ms));
  b.OnFailure(t + 300ms);  // doubles again, capped at 300ms
  EXPECT_FALSE(b.Allow(t + 599ms));
  EXPECT_TRUE(b.Allow(t + 600ms));
  b.OnSuccess();
  EXPECT_EQ(b.state(), CircuitBreaker::State::kClosed);
  EXPECT_TRUE(b.Allow(t + 600ms));
}

}  // namespace
}  // namespace pikv::storage
