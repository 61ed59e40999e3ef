// Distance buckets: which copy of a prefixed-mode document a prompt loads,
// and the keys and encodings a plan gives it (no node needed: PlanKeys).
#include "pikv/client/distance_buckets.h"

#include <gtest/gtest.h>

#include "pikv/client/client.h"
#include "small_namespace.h"

namespace pikv::client {
namespace {

DistanceBuckets Parsed(const std::string& text) {
  auto b = DistanceBuckets::Parse(text);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return b.ok() ? *b : DistanceBuckets{};
}

TEST(DistanceBucketsTest, NoneKeepsEveryDocumentAdjacent) {
  const DistanceBuckets none = Parsed("none");
  for (int64_t d : {0, 1, 100, 5000}) EXPECT_EQ(none.BucketOf(d), 0) << d;
  EXPECT_EQ(none.Name(), "none");
}

TEST(DistanceBucketsTest, PowersOfTwoAreNearestInLogScale) {
  const DistanceBuckets pow2 = Parsed("pow2");
  EXPECT_EQ(pow2.BucketOf(0), 0);
  EXPECT_EQ(pow2.BucketOf(1), 1);
  EXPECT_EQ(pow2.BucketOf(2), 2);
  EXPECT_EQ(pow2.BucketOf(3), 4);      // 3 > 2·√2
  EXPECT_EQ(pow2.BucketOf(181), 128);  // 128·√2 = 181.02: just below
  EXPECT_EQ(pow2.BucketOf(182), 256);
  EXPECT_EQ(pow2.BucketOf(300), 256);
  EXPECT_EQ(pow2.BucketOf(DistanceBuckets::kMaxDistance), DistanceBuckets::kMaxDistance);
  EXPECT_EQ(pow2.BucketOf(-5), 0);
  EXPECT_EQ(pow2.BucketOf(DistanceBuckets::kMaxDistance + 1), 0);
  EXPECT_EQ(pow2.Name(), "pow2");
}

TEST(DistanceBucketsTest, AStepRoundsToItsNearestMultiple) {
  const DistanceBuckets step = Parsed("128");
  EXPECT_EQ(step.BucketOf(0), 0);
  EXPECT_EQ(step.BucketOf(63), 0);
  EXPECT_EQ(step.BucketOf(64), 128);
  EXPECT_EQ(step.BucketOf(191), 128);
  EXPECT_EQ(step.BucketOf(192), 256);
  EXPECT_EQ(step.Name(), "128");
  // The nearest multiple past the largest distance is no bucket: the one below.
  const DistanceBuckets six = Parsed("6");
  EXPECT_EQ(six.BucketOf(DistanceBuckets::kMaxDistance), DistanceBuckets::kMaxDistance - 4);
}

TEST(DistanceBucketsTest, AnythingElseIsRefusedByName) {
  for (const char* bad : {"", "pow3", "0", "-4", "12x", "99999999999999999999", "2000000000"}) {
    auto b = DistanceBuckets::Parse(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.status().message().rfind("distance-buckets:", 0), 0u) << b.status().ToString();
  }
}

ClientOptions Prefixed(const std::string& buckets) {
  ClientOptions o = SmallNamespace("");
  o.controller = "";
  o.mode = AttentionMode::kPrefixed;
  o.distance_buckets = Parsed(buckets);
  return o;
}

ChunkedPrompt Prompt(std::vector<std::vector<int32_t>> segments, int64_t distance = 0) {
  auto p = FromSegments(std::move(segments));
  EXPECT_TRUE(p.ok());
  p->distance = distance;
  return *p;
}

// sys (4 tokens), doc A (100), doc B (3), question: B sits 100 tokens
// after the system prompt, A right after it.
const std::vector<std::vector<int32_t>> kSegments = {
    {1, 2, 3, 4}, std::vector<int32_t>(100, 7), {8, 9, 10}, {11}};

TEST(DistanceBucketsTest, APlanKeysEachDocumentAtItsBucketAndAdjacentOnesAsPrefixedAlwaysDid) {
  Client plain(Prefixed("none")), buckets(Prefixed("pow2"));
  const Plan before = plain.PlanKeys(Prompt(kSegments));
  const Plan after = buckets.PlanKeys(Prompt(kSegments));
  ASSERT_EQ(after.chunks.size(), 3u);
  const ChunkKey sys = plain.KeyOf(kSegments[0]);
  // The system prompt and the adjacent document: the keys prefixed had.
  EXPECT_EQ(after.chunks[0].key, before.chunks[0].key);
  EXPECT_EQ(after.chunks[1].key, before.chunks[1].key);
  EXPECT_EQ(after.chunks[1].sys_key, sys);
  // B at distance 100: bucket 128's copy, keyed by the prefix at 128.
  EXPECT_NE(after.chunks[2].key, before.chunks[2].key);
  EXPECT_EQ(after.chunks[2].sys_key, PrefixKeyAt(sys, 128));
  EXPECT_EQ(after.chunks[2].key, buckets.KeyOf(kSegments[2], {PrefixKeyAt(sys, 128), {}}));
  // Documents are placed and encoded where they sit.
  EXPECT_EQ(after.chunks[2].actual_start, 104);
  EXPECT_EQ(after.chunks[2].encoded_start, 104);
}

TEST(DistanceBucketsTest, AStoreAtADistanceEncodesTheSystemPromptThatFarBack) {
  Client client(Prefixed("pow2"));
  const Plan plan = client.PlanKeys(Prompt({{1, 2, 3, 4}, {8, 9, 10}}, 128));
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].actual_start, 0);
  EXPECT_EQ(plan.chunks[0].encoded_start, -128);
  EXPECT_EQ(plan.chunks[0].key, client.KeyOf(std::vector<int32_t>{1, 2, 3, 4}));
}

TEST(DistanceBucketsTest, APlanMadeElsewhereNamesTheAdjacentCopyItTookOnlyWhereThereIsOne) {
  Client client(Prefixed("pow2"));
  const ChunkKey sys = client.KeyOf(kSegments[0]);
  std::vector<PlannedSource> sources(3);
  sources[2].source = Source::kLocal;
  sources[2].adjacent = true;
  auto plan = client.PlanFrom(Prompt(kSegments), sources, true);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(plan->chunks[2].adjacent);
  EXPECT_EQ(plan->chunks[2].key, client.KeyOf(kSegments[2], {sys, {}}));
  EXPECT_EQ(plan->chunks[2].sys_key, sys);
  EXPECT_FALSE(plan->chunks[1].adjacent);
  sources[1].adjacent = true;  // at distance 0: its bucket is the adjacent copy
  auto refused = client.PlanFrom(Prompt(kSegments), sources, true);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("no adjacent copy"), std::string::npos);
}

}  // namespace
}  // namespace pikv::client
