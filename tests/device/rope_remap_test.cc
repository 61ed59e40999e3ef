#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "device_test_util.h"

namespace pikv::device {
namespace {

using namespace testing;

RopeSpec Spec(RopeStyle style, uint32_t dim, uint32_t rotary, RopeScaling scaling) {
  RopeSpec s;
  s.style = style;
  s.head_dim = dim;
  s.rotary_dim = rotary;
  s.theta = 500000.0;
  s.scaling = scaling;
  s.factor = 8.0;
  s.original_max_position = 8192;
  if (scaling == RopeScaling::kLongRope) {
    s.max_position = 131072;
    for (uint32_t i = 0; i < rotary / 2; ++i) {
      s.long_factor.push_back(1.0 + i * 0.5);
      s.short_factor.push_back(1.0 + i * 0.01);
    }
  }
  return s;
}

struct Case {
  RopeStyle style;
  uint32_t dim, rotary;
  RopeScaling scaling;
  DType dtype;
  KForm form;
  int64_t virtual_start, actual_start;
  Backend backend;
};

void CheckRemap(const Case& c) {
  SCOPED_TRACE(std::string(c.style == RopeStyle::kNeox ? "neox" : "gptj") +
               " dim=" + std::to_string(c.dim) + " rot=" + std::to_string(c.rotary) +
               " scaling=" + std::to_string(int(c.scaling)));
  CheckRemapMatchesEncoding(Spec(c.style, c.dim, c.rotary, c.scaling), KvFormat::kStandard,
                            {c.dtype, c.form, c.virtual_start, c.actual_start, c.backend});
}

TEST(RemapTest, EncodeAtVThenRemapEqualsEncodeAtA) {
  std::vector<Backend> backends = {Backend::kPortable};
  if (Avx2Available()) backends.push_back(Backend::kAvx2);
  for (auto style : {RopeStyle::kNeox, RopeStyle::kGptj}) {
    for (auto [dim, rotary] :
         {std::pair{64u, 64u}, std::pair{80u, 32u}}) {  // full, and partial like Phi-2
      for (auto scaling : {RopeScaling::kNone, RopeScaling::kLinear, RopeScaling::kLlama3,
                           RopeScaling::kNtk, RopeScaling::kYarn, RopeScaling::kLongRope}) {
        for (auto dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
          for (auto form : {KForm::kRotated, KForm::kPreRope}) {
            for (auto [v, a] :
                 {std::pair<int64_t, int64_t>{0, 4096}, {1000, 3}, {0, 1000000}, {1000000, 17}}) {
              for (auto b : backends)
                CheckRemap({style, dim, rotary, scaling, dtype, form, v, a, b});
            }
          }
        }
      }
    }
  }
}

TEST(RemapTest, ReRotationUsesThePureRotationNotTheMagnitudeFactor) {
  RopeSpec yarn = Spec(RopeStyle::kNeox, 64, 64, RopeScaling::kYarn);
  ASSERT_GT(yarn.AttentionScale(), 1.1);  // encoding scales cos/sin
  auto pure = PureRotation(yarn, 0);
  EXPECT_EQ(pure.cos[0], 1.f);  // a zero shift changes nothing
  auto enc = Encoding(yarn, 0);
  EXPECT_FLOAT_EQ(enc.cos[0], static_cast<float>(yarn.AttentionScale()));
}

TEST(RemapTest, MlaRotatesOnlyTheRopePart) {
  RopeSpec spec = Spec(RopeStyle::kGptj, 96, 32, RopeScaling::kNone);
  spec.rope_offset = 64;  // latent 64 dims, then 32 rope dims
  FloatKv kv = RandomKv(2, 3, 1, 96, 4);
  auto object = MakeChunk(kv, spec, DType::kF32, KForm::kRotated, 100, /*mla=*/true);
  Cache cache(PagedLayout::Order::kFlash, DType::kF32, 2, 1, 96, 4, 2, /*mla=*/true);
  std::vector<int64_t> slots = {5, 0, 2};
  ASSERT_TRUE(Remap(object, spec, 900, slots, cache.layout).ok());
  for (uint32_t l = 0; l < 2; ++l) {
    for (uint32_t t = 0; t < 3; ++t) {
      std::vector<float> want(&kv.K(l, t, 0, 0), &kv.K(l, t, 0, 0) + 96);
      EncodeHead(spec, 900.0 + t, want.data());
      for (uint32_t d = 0; d < 96; ++d) {
        if (d < 64) {
          ASSERT_EQ(cache.At(l, 0, slots[t], 0, d), kv.K(l, t, 0, d))
              << "latent dim " << d << " changed";
        } else {
          ASSERT_NEAR(cache.At(l, 0, slots[t], 0, d), want[d], 1e-5f * 4);
        }
      }
    }
  }
}

TEST(RemapTest, EveryLayoutOrderAndSkippedSlots) {
  const RopeSpec spec = Spec(RopeStyle::kNeox, 64, 64, RopeScaling::kNone);
  FloatKv kv = RandomKv(2, 6, 2, 64, 8);
  auto object = MakeChunk(kv, spec, DType::kBF16, KForm::kRotated, 0);
  for (auto order : {PagedLayout::Order::kFlash, PagedLayout::Order::kFlashHnd,
                     PagedLayout::Order::kBlockMajor}) {
    Cache cache(order, DType::kBF16, 2, 2, 64, 4, 3);
    std::vector<int64_t> slots = {11, -1, 0, 4, -1, 7};
    const auto untouched = cache.memory;
    ASSERT_TRUE(Remap(object, spec, 0, slots, cache.layout).ok());
    // At shift 0 the cache holds exactly the object's bytes; skipped tokens write nothing.
    auto again = Gather(cache.layout, std::vector<int64_t>{11, 0, 4, 7}, spec,
                        {ChunkKey{1, 1}, "m", {7, 7, 7, 7}});
    ASSERT_TRUE(again.ok());
    size_t changed = 0;
    for (size_t l = 0; l < 2; ++l) {
      for (size_t i = 0; i < cache.memory[l].size(); ++i)
        changed += cache.memory[l][i] != untouched[l][i];
    }
    EXPECT_LE(changed, 2u * 4 * 2 * 2 * 64 * 2) << "wrote outside the four mapped slots";
    for (uint32_t l = 0; l < 2; ++l) {
      for (uint32_t h = 0; h < 2; ++h) {
        uint8_t want[2];
        Encode(DType::kBF16, want, kv.V(l, 3, h, 5));
        EXPECT_EQ(cache.At(l, 1, 4, h, 5), Decode(DType::kBF16, want));
      }
    }
  }
}

TEST(RemapTest, GatherThenRemapAtTheSamePositionIsBitExact) {
  const RopeSpec spec = Spec(RopeStyle::kGptj, 64, 64, RopeScaling::kLlama3);
  for (auto dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (auto order : {PagedLayout::Order::kFlash, PagedLayout::Order::kFlashHnd,
                       PagedLayout::Order::kBlockMajor}) {
      // An engine's cache holding some chunk at positions 300.. in random slots.
      FloatKv kv = RandomKv(2, 7, 2, 64, 12);
      auto seed_object = MakeChunk(kv, spec, dtype, KForm::kRotated, 300);
      Cache engine(order, dtype, 2, 2, 64, 4, 4);
      auto slots = RandomSlots(7, 4, 4, 21);
      ASSERT_TRUE(Remap(seed_object, spec, 300, slots, engine.layout).ok());
      auto object = Gather(engine.layout, slots, spec,
                           {ChunkKey{5, 6}, "m", std::vector<int32_t>(7, 3), KForm::kRotated, 300});
      ASSERT_TRUE(object.ok());
      ASSERT_TRUE(VerifyChunkObject(*object).ok()) << "gather's in-pass checksum must verify";
      Cache other(order, dtype, 2, 2, 64, 4, 4);
      auto other_slots = RandomSlots(7, 4, 4, 33);
      for (auto b : {Backend::kPortable, Backend::kAuto}) {
        ASSERT_TRUE(Remap(*object, spec, 300, other_slots, other.layout, {2, b}).ok());
        for (uint32_t l = 0; l < 2; ++l) {
          for (uint32_t p = 0; p < 2; ++p) {
            for (uint32_t t = 0; t < 7; ++t) {
              for (uint32_t h = 0; h < 2; ++h) {
                ASSERT_EQ(std::memcmp(engine.layout.HeadVector(l, p, slots[t], h),
                                      other.layout.HeadVector(l, p, other_slots[t], h),
                                      64 * DTypeSize(dtype)),
                          0);
              }
            }
          }
        }
      }
    }
  }
}

// A gather copies runs of rows whose sources follow each other (consecutive
// slots in vLLM's layout, across blocks) as one memcpy, and each head vector
// apart where heads are not adjacent (HND): the same chunk held in slots with
// runs, breaks and a reversed stretch gathers to the same object from every
// layout, sealed or not, on one thread or several.
TEST(RemapTest, AGatherOfRunsOfSlotsEqualsItsHeadByHeadCopyInEveryLayout) {
  const RopeSpec spec = Spec(RopeStyle::kNeox, 64, 64, RopeScaling::kNone);
  // 4 layers x 2 planes x 40 slots = 320 rows: five threads' worth (64 rows
  // each at least), so runs meet the ends of the threads' ranges.
  FloatKv kv = RandomKv(4, 40, 2, 64, 17);
  std::vector<int64_t> slots;
  for (int64_t s = 1; s <= 17; ++s) slots.push_back(s);   // across four block boundaries
  for (int64_t s : {40, 41}) slots.push_back(s);          // a break
  for (int64_t s = 30; s >= 21; --s) slots.push_back(s);  // reversed
  for (int64_t s = 48; s <= 58; ++s) slots.push_back(s);
  std::vector<std::vector<uint8_t>> objects;
  for (auto order : {PagedLayout::Order::kFlash, PagedLayout::Order::kFlashHnd,
                     PagedLayout::Order::kBlockMajor}) {
    Cache cache(order, DType::kBF16, 4, 2, 64, 4, 16);
    ASSERT_TRUE(
        Remap(MakeChunk(kv, spec, DType::kBF16, KForm::kRotated, 0), spec, 0, slots, cache.layout)
            .ok());
    GatherSpec g{ChunkKey{8, 11}, "m", std::vector<int32_t>(slots.size(), 4), KForm::kRotated, 0};
    auto sealed = Gather(cache.layout, slots, spec, g);
    ASSERT_TRUE(sealed.ok());
    ASSERT_TRUE(VerifyChunkObject(*sealed).ok());
    g.checksum = false;
    g.threads = 3;
    auto unsealed = Gather(cache.layout, slots, spec, g);
    ASSERT_TRUE(unsealed.ok() && SealChunkObject(*unsealed).ok());
    EXPECT_EQ(*unsealed, *sealed);
    objects.push_back(*sealed);
  }
  EXPECT_EQ(objects[0], objects[1]) << "vLLM's layout (runs) and HND (head by head) differ";
  EXPECT_EQ(objects[2], objects[1]) << "block-major (runs) and HND (head by head) differ";
}

// An unsealed gather of kStreamGatherBytes or more streams its rows past
// the caches where its rows come in runs (StreamCopy, whole lines apart
// from ragged ends): the object is the one a sealed gather (plain copies)
// writes, in vLLM's layout (runs of a block's slots, blocks shuffled, a
// reversed stretch) and in HND (head vectors one by one, plain), on several
// threads.
TEST(RemapTest, ALargeUnsealedGatherStreamsTheSameObjectAsASealedOne) {
  const RopeSpec spec = Spec(RopeStyle::kNeox, 64, 64, RopeScaling::kNone);
  constexpr uint32_t kBlock = 16, kBlocks = 520, kTokens = 8200;
  // 2 layers x 2 planes x 8200 tokens x 4 heads x 64 dims in bf16.
  static_assert(uint64_t{2} * 2 * kTokens * 4 * 64 * 2 >= kStreamGatherBytes,
                "the unsealed gather must be large enough to stream");
  std::vector<uint64_t> blocks(kBlocks);
  for (uint64_t b = 0; b < kBlocks; ++b) blocks[b] = b;
  std::shuffle(blocks.begin(), blocks.end(), std::mt19937_64(3));
  std::vector<int64_t> slots;
  for (uint64_t b : blocks)
    for (uint32_t i = 0; i < kBlock && slots.size() < kTokens; ++i)
      slots.push_back(int64_t(b * kBlock + i));
  std::reverse(slots.begin() + 100, slots.begin() + 300);
  for (auto order : {PagedLayout::Order::kFlash, PagedLayout::Order::kFlashHnd}) {
    Cache cache(order, DType::kBF16, 2, 4, 64, kBlock, kBlocks);
    std::mt19937_64 rng(11);
    for (auto& layer : cache.memory)
      for (uint8_t& byte : layer) byte = static_cast<uint8_t>(rng());
    GatherSpec g{ChunkKey{8, 12}, "m", std::vector<int32_t>(kTokens, 4), KForm::kRotated, 0};
    auto sealed = Gather(cache.layout, slots, spec, g);
    ASSERT_TRUE(sealed.ok()) << sealed.status().ToString();
    g.checksum = false;
    g.threads = 3;
    auto streamed = Gather(cache.layout, slots, spec, g);
    ASSERT_TRUE(streamed.ok() && SealChunkObject(*streamed).ok());
    EXPECT_TRUE(*streamed == *sealed) << "the streamed object differs";
  }
}

// An unsealed gather (a store into the node's arena, sealed there) splits
// its rows over threads: the object is the sequential one's, byte for byte,
// and seals to the checksum a sealed gather computes.
TEST(RemapTest, AnUnsealedGatherOnManyThreadsWritesTheSameObject) {
  const RopeSpec spec = Spec(RopeStyle::kNeox, 64, 64, RopeScaling::kNone);
  for (auto order : {PagedLayout::Order::kFlash, PagedLayout::Order::kFlashHnd,
                     PagedLayout::Order::kBlockMajor}) {
    FloatKv kv = RandomKv(4, 61, 2, 64, 13);  // 4 x 2 x 61 = 488 rows: several threads' worth
    Cache cache(order, DType::kBF16, 4, 2, 64, 4, 16);
    auto slots = RandomSlots(61, 4, 16, 8);
    ASSERT_TRUE(
        Remap(MakeChunk(kv, spec, DType::kBF16, KForm::kRotated, 0), spec, 0, slots, cache.layout)
            .ok());
    GatherSpec g{ChunkKey{8, 9}, "m", std::vector<int32_t>(61, 4), KForm::kRotated, 0};
    auto sealed = Gather(cache.layout, slots, spec, g);
    ASSERT_TRUE(sealed.ok());
    g.checksum = false;
    auto one = Gather(cache.layout, slots, spec, g);
    g.threads = 5;
    auto many = Gather(cache.layout, slots, spec, g);
    ASSERT_TRUE(one.ok() && many.ok());
    EXPECT_EQ(*one, *many);
    ASSERT_TRUE(SealChunkObject(*many).ok());
    EXPECT_EQ(*many, *sealed);
  }
}

// An unsealed gather tells its writer's node what is final as it goes: the
// header first, then rows in order, never a byte changed once told.
TEST(RemapTest, AnUnsealedGatherMarksWhatIsWrittenInOrderAndNeverChangesIt) {
  const RopeSpec spec = Spec(RopeStyle::kNeox, 128, 128, RopeScaling::kNone);
  // 8 layers x 2 planes x 1000 tokens x 2 KiB rows: 31 MiB, several kWrittenSteps.
  Cache cache(PagedLayout::Order::kFlash, DType::kBF16, 8, 8, 128, 16, 64);
  std::mt19937_64 rng(21);
  for (auto& layer : cache.memory)
    for (auto& b : layer) b = static_cast<uint8_t>(rng());
  auto slots = RandomSlots(1000, 16, 64, 22);
  for (int threads : {1, 3}) {
    GatherSpec g{ChunkKey{8, 10}, "m", std::vector<int32_t>(1000, 4), KForm::kRotated, 0};
    g.checksum = false;
    g.threads = threads;
    auto size = GatherSize(cache.layout, slots, spec, g);
    ASSERT_TRUE(size.ok());
    std::vector<uint8_t> object(*size, 0);
    std::vector<std::pair<size_t, uint64_t>> marks;  // where, and the hash of the bytes before
    g.written = [&](size_t n) { marks.emplace_back(n, Xxh3({object.data(), n})); };
    ASSERT_TRUE(GatherInto(cache.layout, slots, spec, g, object).ok());
    ASSERT_GE(marks.size(), 2u);
    auto header = ParseChunkHeader(object);
    ASSERT_TRUE(header.ok());
    EXPECT_GT(marks.front().first, header->header_size);
    EXPECT_EQ(marks.back().first, object.size());
    for (size_t i = 0; i < marks.size(); ++i) {
      if (i > 0) {
        EXPECT_GT(marks[i].first, marks[i - 1].first);
      }
      EXPECT_EQ(Xxh3({object.data(), marks[i].first}), marks[i].second) << "mark " << i;
    }
    g.written = {};
    std::vector<uint8_t> unmarked(*size, 0);
    ASSERT_TRUE(GatherInto(cache.layout, slots, spec, g, unmarked).ok());
    EXPECT_EQ(object, unmarked);
  }
}

TEST(RemapTest, GatherAtVRemapToAEqualsGatherAtA) {
  const RopeSpec spec = Spec(RopeStyle::kNeox, 64, 64, RopeScaling::kYarn);
  FloatKv kv = RandomKv(1, 5, 2, 64, 14);
  Cache at_v(PagedLayout::Order::kFlashHnd, DType::kF32, 1, 2, 64, 4, 2), at_a = at_v, moved = at_v;
  at_a.layout.layers = {at_a.memory[0].data()};
  moved.layout.layers = {moved.memory[0].data()};
  std::vector<int64_t> slots = {0, 1, 2, 3, 4};
  ASSERT_TRUE(
      Remap(MakeChunk(kv, spec, DType::kF32, KForm::kPreRope, 0), spec, 50, slots, at_v.layout)
          .ok());
  ASSERT_TRUE(
      Remap(MakeChunk(kv, spec, DType::kF32, KForm::kPreRope, 0), spec, 7000, slots, at_a.layout)
          .ok());
  auto object = Gather(at_v.layout, slots, spec,
                       {ChunkKey{1, 2}, "m", std::vector<int32_t>(5, 1), KForm::kRotated, 50});
  ASSERT_TRUE(object.ok());
  ASSERT_TRUE(Remap(*object, spec, 7000, slots, moved.layout).ok());
  for (int64_t s : slots) {
    for (uint32_t h = 0; h < 2; ++h) {
      for (uint32_t d = 0; d < 64; ++d)
        ASSERT_NEAR(moved.At(0, 0, s, h, d), at_a.At(0, 0, s, h, d), 2e-5f);
    }
  }
}

class RemapRejectsTest : public ::testing::Test {
 protected:
  RopeSpec spec_ = Spec(RopeStyle::kNeox, 64, 64, RopeScaling::kNone);
  FloatKv kv_ = RandomKv(2, 4, 2, 64, 3);
  std::vector<uint8_t> object_ = MakeChunk(kv_, spec_, DType::kBF16, KForm::kRotated, 0);
  Cache cache_{PagedLayout::Order::kFlash, DType::kBF16, 2, 2, 64, 4, 2};
  std::vector<int64_t> slots_ = {0, 1, 2, 3};

  void ExpectRejected(Status s, const std::string& what) {
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << what << ": " << s.ToString();
    for (auto& layer : cache_.memory) {
      ASSERT_TRUE(std::all_of(layer.begin(), layer.end(), [](uint8_t b) { return b == 0xAB; }))
          << what << ": the cache was written before the error";
    }
  }
};

TEST_F(RemapRejectsTest, BadInputIsAnErrorBeforeAnyWrite) {
  ExpectRejected(Remap(object_, spec_, 0, std::vector<int64_t>{0, 1, 2, 8}, cache_.layout),
                 "slot out of range");
  ExpectRejected(Remap(object_, spec_, 0, std::vector<int64_t>{0, 1, 2, -2}, cache_.layout),
                 "negative slot");
  ExpectRejected(Remap(object_, spec_, 0, std::vector<int64_t>{0, 1, 1, 3}, cache_.layout),
                 "overlapping slots");
  ExpectRejected(Remap(object_, spec_, 0, std::vector<int64_t>{0, 1, 2}, cache_.layout),
                 "slot count");
  Cache f16(PagedLayout::Order::kFlash, DType::kF16, 2, 2, 64, 4, 2);
  EXPECT_EQ(Remap(object_, spec_, 0, slots_, f16.layout).code(), ErrorCode::kInvalidArgument)
      << "dtype mismatch";
  Cache heads(PagedLayout::Order::kFlash, DType::kBF16, 2, 4, 64, 4, 2);
  EXPECT_EQ(Remap(object_, spec_, 0, slots_, heads.layout).code(), ErrorCode::kInvalidArgument)
      << "shape mismatch";
  Cache layers(PagedLayout::Order::kFlash, DType::kBF16, 3, 2, 64, 4, 2);
  EXPECT_EQ(Remap(object_, spec_, 0, slots_, layers.layout).code(), ErrorCode::kInvalidArgument)
      << "layer count";
  RopeSpec other = spec_;
  other.theta = 10000;
  ExpectRejected(Remap(object_, other, 0, slots_, cache_.layout), "RoPE signature mismatch");
  PagedLayout overlapping = cache_.layout;
  overlapping.stride_head = 32;  // head vectors of 64 would overlap
  ExpectRejected(Remap(object_, spec_, 0, slots_, overlapping), "overlapping strides");
  auto corrupt = object_;
  corrupt[20] ^= 1;  // header byte
  EXPECT_EQ(Remap(corrupt, spec_, 0, slots_, cache_.layout).code(), ErrorCode::kCorruption);
}

TEST(RopeSpecTest, ParsesModelConfigs) {
  auto llama = RopeSpec::FromConfigJson(
      R"({"hidden_size":4096,"num_attention_heads":32,"rope_theta":500000.0,
    "max_position_embeddings":131072,"rope_scaling":{"factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,
    "original_max_position_embeddings":8192,"rope_type":"llama3"}})");
  ASSERT_TRUE(llama.ok()) << llama.status().ToString();
  EXPECT_EQ(llama->head_dim, 128u);
  EXPECT_EQ(llama->scaling, RopeScaling::kLlama3);
  auto inv = llama->InverseFrequencies();
  EXPECT_DOUBLE_EQ(inv[0], 1.0);  // highest frequency: unchanged
  EXPECT_NEAR(inv.back(), std::pow(500000.0, -126.0 / 128) / 8,
              1e-15);  // lowest: divided by factor
  auto phi2 = RopeSpec::FromConfigJson(
      R"({"hidden_size":2560,"num_attention_heads":32,"partial_rotary_factor":0.4})");
  ASSERT_TRUE(phi2.ok());
  EXPECT_EQ(phi2->head_dim, 80u);
  EXPECT_EQ(phi2->rotary_dim, 32u);
  auto yarn = RopeSpec::FromConfigJson(R"({"head_dim":64,"rope_scaling":{"type":"yarn","factor":4.0,
    "original_max_position_embeddings":4096}})");
  ASSERT_TRUE(yarn.ok());
  EXPECT_NEAR(yarn->AttentionScale(), 0.1 * std::log(4.0) + 1, 1e-12);
  auto dynamic =
      RopeSpec::FromConfigJson(R"({"head_dim":64,"rope_scaling":{"type":"dynamic","factor":2.0}})");
  EXPECT_EQ(dynamic.code(), ErrorCode::kUnsupported);
  EXPECT_NE(dynamic.status().message().find("sequence length"), std::string::npos);
  EXPECT_EQ(RopeSpec::FromConfigJson("{}").code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(RopeSpec::FromConfigJson("not json").code(), ErrorCode::kInvalidArgument);
  auto longrope =
      RopeSpec::FromConfigJson(R"({"head_dim":4,"rope_scaling":{"type":"longrope","long_factor":[1],
    "short_factor":[1,2]}})");
  EXPECT_EQ(longrope.code(), ErrorCode::kInvalidArgument)
      << "factor lists must match rotary_dim / 2";
}

// Config keys the engines read and pikv once ignored or misread (issue 11).
TEST(RopeSpecTest, ReadsTheConfigKeysTheEnginesRead) {
  // YaRN with DeepSeek's mscale / mscale_all_dim: the magnitude is their ratio
  // (1.0 when equal), not 0.1 ln(factor) + 1 = 1.369.
  auto equal = RopeSpec::FromConfigJson(R"({"head_dim":64,"max_position_embeddings":163840,
    "rope_scaling":{"type":"yarn","factor":40,"mscale":1.0,"mscale_all_dim":1.0,
    "original_max_position_embeddings":4096,"beta_fast":32,"beta_slow":1}})");
  ASSERT_TRUE(equal.ok()) << equal.status().ToString();
  EXPECT_DOUBLE_EQ(equal->AttentionScale(), 1.0);
  auto ratio = RopeSpec::FromConfigJson(R"({"head_dim":64,"rope_scaling":{"type":"yarn",
    "factor":40,"mscale":0.707,"mscale_all_dim":1.0,"original_max_position_embeddings":4096}})");
  ASSERT_TRUE(ratio.ok());
  EXPECT_NEAR(ratio->AttentionScale(),
              (0.1 * 0.707 * std::log(40.0) + 1) / (0.1 * std::log(40.0) + 1), 1e-15);
  EXPECT_NE(ratio->Signature(), equal->Signature());

  // gpt-oss: YaRN with truncate false keeps the correction range unrounded.
  const char* kOss = R"({"head_dim":64,"rope_theta":150000,"rope_scaling":{"rope_type":"yarn",
    "factor":32.0,"beta_fast":32.0,"beta_slow":1.0,"original_max_position_embeddings":4096%s}})";
  char with_flag[512], without[512];
  std::snprintf(with_flag, sizeof with_flag, kOss, R"(,"truncate":false)");
  std::snprintf(without, sizeof without, kOss, "");
  auto oss = RopeSpec::FromConfigJson(with_flag);
  auto rounded = RopeSpec::FromConfigJson(without);
  ASSERT_TRUE(oss.ok() && rounded.ok()) << oss.status().ToString();
  EXPECT_FALSE(oss->yarn_truncate);
  EXPECT_NE(oss->Signature(), rounded->Signature());
  const double dim = 64, base = 150000, orig = 4096, pi = std::acos(-1.0);
  auto correction = [&](double rot) {
    return dim * std::log(orig / (rot * 2 * pi)) / (2 * std::log(base));
  };
  const double low = std::max(correction(32), 0.0), high = std::min(correction(1), dim - 1);
  const auto inv = oss->InverseFrequencies();
  for (int i = 0; i < 32; ++i) {
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double f = std::pow(base, -2.0 * i / dim);
    EXPECT_NEAR(inv[i], f / 32 * ramp + f * (1 - ramp), 1e-15 * f) << i;
  }

  // Phi-3: original_max_position_embeddings at the top level; the long
  // factors and sqrt(1 + ln(32) / ln(4096)) = 1.19 follow from it.
  std::string longs, shorts;
  for (int i = 0; i < 48; ++i) {
    longs += (i ? "," : "") + std::to_string(1.0 + i);
    shorts += (i ? "," : "") + std::string("1.0");
  }
  auto phi3 = RopeSpec::FromConfigJson(
      R"({"hidden_size":3072,"num_attention_heads":32,"max_position_embeddings":131072,
      "original_max_position_embeddings":4096,"rope_theta":10000.0,"rope_scaling":{
      "type":"longrope","long_factor":[)" +
      longs + R"(],"short_factor":[)" + shorts + "]}}");
  ASSERT_TRUE(phi3.ok()) << phi3.status().ToString();
  EXPECT_EQ(phi3->original_max_position, 4096u);
  EXPECT_NEAR(phi3->AttentionScale(), std::sqrt(1 + std::log(32.0) / std::log(4096.0)), 1e-15);
  EXPECT_NEAR(phi3->InverseFrequencies()[47], std::pow(10000.0, -94.0 / 96) / 48, 1e-18);

  // GPT-NeoX / Pythia rotate rotary_pct of the head; GPT-J names its own keys.
  auto pythia = RopeSpec::FromConfigJson(
      R"({"hidden_size":2048,"num_attention_heads":16,"rotary_pct":0.25,"rotary_emb_base":10000})");
  ASSERT_TRUE(pythia.ok()) << pythia.status().ToString();
  EXPECT_EQ(pythia->head_dim, 128u);
  EXPECT_EQ(pythia->rotary_dim, 32u);
  auto gptj = RopeSpec::FromConfigJson(
      R"({"n_embd":4096,"n_head":16,"rotary_dim":64,"n_positions":2048})", RopeStyle::kGptj);
  ASSERT_TRUE(gptj.ok()) << gptj.status().ToString();
  EXPECT_EQ(gptj->head_dim, 256u);
  EXPECT_EQ(gptj->rotary_dim, 64u);
}

TEST(RopeSpecTest, RefusesWhatItDoesNotUnderstandByName) {
  auto unknown = RopeSpec::FromConfigJson(
      R"({"head_dim":64,"rope_scaling":{"type":"yarn","factor":4,"extrapolation_factor":1}})");
  EXPECT_EQ(unknown.code(), ErrorCode::kUnsupported);
  EXPECT_NE(unknown.status().message().find("rope_scaling.extrapolation_factor"), std::string::npos)
      << unknown.status().ToString();
  // DeepSeek-V3 (MLA): hidden/heads would give 56; the rope part is 64 dims
  // beside a 512-wide latent. Refused until pikv can place it.
  auto mla = RopeSpec::FromConfigJson(R"({"hidden_size":7168,"num_attention_heads":128,
    "kv_lora_rank":512,"qk_rope_head_dim":64,"qk_nope_head_dim":128,"rope_scaling":{"type":"yarn",
    "factor":40,"mscale":1.0,"mscale_all_dim":1.0,"original_max_position_embeddings":4096}})");
  EXPECT_EQ(mla.code(), ErrorCode::kUnsupported);
  EXPECT_NE(mla.status().message().find("kv_lora_rank"), std::string::npos);
  auto twice =
      RopeSpec::FromConfigJson(R"({"head_dim":64,"rotary_dim":32,"partial_rotary_factor":0.5})");
  EXPECT_EQ(twice.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(RopeSpec::FromConfigJson(R"({"head_dim":64,"rotary_pct":-1})").code(),
            ErrorCode::kInvalidArgument);
  for (const char* count : {R"({"head_dim":1e300})", R"({"head_dim":64.5})", R"({"head_dim":-64})",
                            R"({"head_dim":64,"max_position_embeddings":1e99})"}) {
    EXPECT_EQ(RopeSpec::FromConfigJson(count).code(), ErrorCode::kInvalidArgument) << count;
  }
  auto uneven = RopeSpec::FromConfigJson(R"({"hidden_size":100,"num_attention_heads":3})");
  EXPECT_EQ(uneven.code(), ErrorCode::kInvalidArgument);
}

// Every rope_scaling type is read by its one entry: aliases included, and
// what is neither an object nor a known type refused by name.
TEST(RopeSpecTest, ReadsEachScalingTypeByItsEntry) {
  auto ntk = RopeSpec::FromConfigJson(
      R"({"head_dim":64,"rope_scaling":{"type":"static_ntk","factor":2.0}})");
  ASSERT_TRUE(ntk.ok()) << ntk.status().ToString();
  EXPECT_EQ(ntk->scaling, RopeScaling::kNtk);
  auto su = RopeSpec::FromConfigJson(R"({"head_dim":4,"max_position_embeddings":8192,
    "rope_scaling":{"type":"su","long_factor":[1,2],"short_factor":[1,1],
    "original_max_position_embeddings":4096}})");
  ASSERT_TRUE(su.ok()) << su.status().ToString();
  EXPECT_EQ(su->scaling, RopeScaling::kLongRope);
  EXPECT_EQ(su->max_position, 8192u);
  auto foreign = RopeSpec::FromConfigJson(
      R"({"head_dim":64,"rope_scaling":{"type":"ntk","factor":2.0,"low_freq_factor":1.0}})");
  EXPECT_EQ(foreign.code(), ErrorCode::kUnsupported) << "llama3's key is not ntk's";
  auto scalar = RopeSpec::FromConfigJson(R"({"head_dim":64,"rope_scaling":2.0})");
  EXPECT_EQ(scalar.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(scalar.status().message().find("rope_scaling is not an object"), std::string::npos);
  auto unknown = RopeSpec::FromConfigJson(R"({"head_dim":64,"rope_scaling":{"type":"xpos"}})");
  EXPECT_EQ(unknown.code(), ErrorCode::kUnsupported);
  EXPECT_NE(unknown.status().message().find("unknown rope_scaling type 'xpos'"), std::string::npos);
}

TEST(RopeSpecTest, SignatureSeparatesEverythingThatChangesTheKv) {
  std::set<std::string> seen;
  for (auto scaling : {RopeScaling::kNone, RopeScaling::kLinear, RopeScaling::kLlama3,
                       RopeScaling::kNtk, RopeScaling::kYarn, RopeScaling::kLongRope}) {
    for (auto style : {RopeStyle::kNeox, RopeStyle::kGptj}) {
      EXPECT_TRUE(seen.insert(Spec(style, 64, 64, scaling).Signature()).second);
      EXPECT_TRUE(seen.insert(Spec(style, 64, 32, scaling).Signature()).second);
    }
  }
}

}  // namespace
}  // namespace pikv::device
