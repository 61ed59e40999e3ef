// Exactness on real attention: a question answered over chunk KV that was
// computed in isolation, serialized as chunk objects and remapped into a paged
// cache gives the same logits as a from-scratch forward pass.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "device_test_util.h"
#include "pikv/device/attention_metadata.h"
#include "pikv/engine/reference_model.h"

namespace pikv::device {
namespace {

using engine::ModelConfig;
using engine::ReferenceModel;
using Tokens = std::vector<int32_t>;

class ExactnessTest : public ::testing::Test {
 protected:
  ExactnessTest() : ExactnessTest(Config()) {}
  explicit ExactnessTest(ModelConfig config) : model_(std::move(config)) {}
  static ModelConfig Config() {
    ModelConfig c;
    RopeSpec rope;
    rope.head_dim = rope.rotary_dim = c.head_dim;
    rope.theta = 10000;
    c.rope = rope;
    return c;
  }
  ReferenceModel model_;
  const RopePlan& rope() const { return model_.config().rope; }

  Tokens Random(size_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    Tokens t(n);
    for (auto& x : t) x = static_cast<int32_t>(rng() % model_.config().vocab);
    return t;
  }
  Tokens sys1_ = Random(5, 1), sys2_ = Random(6, 2), c1_ = Random(7, 3), c2_ = Random(4, 4),
         c3_ = Random(6, 5), q_ = Random(3, 6);

  // The question's logits from scratch, under the chunked mask.
  std::vector<float> Scratch(const std::vector<Tokens>& segments, AttentionMode mode) {
    std::vector<uint32_t> lengths;
    Tokens all;
    for (const auto& s : segments) {
      lengths.push_back(static_cast<uint32_t>(s.size()));
      all.insert(all.end(), s.begin(), s.end());
    }
    auto meta = *BuildAttentionMetadata(lengths, mode);
    auto logits = model_.Forward(all, meta.positions, {},
                                 [&](size_t q, size_t k) { return meta.Allowed(q, k); });
    const size_t vocab = model_.config().vocab, nq = segments.back().size();
    return std::vector<float>(logits.end() - nq * vocab, logits.end());
  }

  // Serializes the model's KV for `tokens` (the last `keep` of them) as a
  // chunk object rotated at `virtual_start` (the position of the first kept token).
  std::vector<uint8_t> Object(const std::vector<ReferenceModel::LayerKv>& kv, size_t total,
                              size_t keep, int64_t virtual_start) {
    const auto& c = model_.config();
    ChunkHeader h;
    h.key = ChunkKey{uint64_t(virtual_start), keep};
    h.model_id = "reference";
    h.geometry = {c.layers,    static_cast<uint32_t>(keep), c.kv_heads, c.head_dim,
                  DType::kF32, KvFormat::kStandard};
    SetHeaderRope(rope(), h);
    h.k_form = KForm::kRotated;
    h.virtual_start = virtual_start;
    h.tokens.assign(keep, 0);
    const size_t row = size_t{c.kv_heads} * c.head_dim;
    std::vector<float> payload;
    for (uint32_t l = 0; l < c.layers; ++l) {
      for (const auto* plane : {&kv[l].k, &kv[l].v})
        payload.insert(payload.end(), plane->begin() + (total - keep) * row, plane->end());
    }
    return *BuildChunkObject(
        h, {reinterpret_cast<const uint8_t*>(payload.data()), payload.size() * 4});
  }

  // A chunk computed alone (causal within itself) at virtual positions.
  std::vector<uint8_t> Isolated(const Tokens& tokens, int64_t virtual_start) {
    std::vector<int64_t> pos(tokens.size());
    std::iota(pos.begin(), pos.end(), virtual_start);
    std::vector<ReferenceModel::LayerKv> kv;
    model_.Forward(
        tokens, pos, {}, [](size_t q, size_t k) { return k <= q; }, &kv);
    return Object(kv, tokens.size(), tokens.size(), virtual_start);
  }

  // A chunk computed after a system prompt (prefixed): it sees the whole
  // system prompt; returns only the chunk's KV.
  std::vector<uint8_t> AfterSystem(const Tokens& sys, const Tokens& chunk, int64_t virtual_start) {
    Tokens all = sys;
    all.insert(all.end(), chunk.begin(), chunk.end());
    std::vector<int64_t> pos(all.size());
    std::iota(pos.begin(), pos.end(), virtual_start);
    const size_t ns = sys.size();
    std::vector<ReferenceModel::LayerKv> kv;
    // The system prompt comes first, so causal attention is exactly "the chunk
    // sees the whole system prompt and itself causally".
    model_.Forward(
        all, pos, {}, [](size_t q, size_t k) { return k <= q; }, &kv);
    return Object(kv, all.size(), chunk.size(), virtual_start + static_cast<int64_t>(ns));
  }

  // The question's logits over remapped chunk objects (one per segment before
  // the question, in prompt order) in a paged cache with a random block table.
  std::vector<float> Reused(const std::vector<const std::vector<uint8_t>*>& objects,
                            const std::vector<Tokens>& segments, AttentionMode mode,
                            uint64_t seed) {
    std::vector<uint32_t> lengths;
    for (const auto& s : segments) lengths.push_back(static_cast<uint32_t>(s.size()));
    auto meta = *BuildAttentionMetadata(lengths, mode);
    const auto& c = model_.config();
    const uint32_t block = 4;
    const uint64_t blocks = meta.num_tokens() / block + 4;
    testing::Cache cache(PagedLayout::Order::kFlash, DType::kF32, c.layers, c.kv_heads, c.head_dim,
                         block, blocks);
    auto slots =
        testing::RandomSlots(meta.num_tokens(), block, blocks, seed);  // a shuffled block table
    for (size_t s = 0; s + 1 < segments.size(); ++s) {
      const uint32_t start = meta.segment_starts[s];
      std::span<const int64_t> chunk_slots(slots.data() + start, lengths[s]);
      Status st = Remap(*objects[s], rope(), meta.positions[start], chunk_slots, cache.layout);
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
    const uint32_t qs = meta.segment_starts.back();
    ReferenceModel::Past past{&cache.layout,
                              std::vector<int64_t>(slots.begin(), slots.begin() + qs)};
    std::vector<int64_t> qpos(meta.positions.begin() + qs, meta.positions.end());
    return model_.Forward(segments.back(), qpos, past,
                          [&](size_t q, size_t k) { return meta.Allowed(qs + q, k); });
  }

  static double MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
    return m;
  }
};

TEST_F(ExactnessTest, IsolatedChunksReusedAnywhereGiveTheSameLogits) {
  // Every chunk computed once, alone, at its own virtual start.
  auto s1 = Isolated(sys1_, 1000), s2 = Isolated(sys2_, 5000);
  auto o1 = Isolated(c1_, 2000), o2 = Isolated(c2_, 3000), o3 = Isolated(c3_, 40000);

  auto base = Scratch({sys1_, c1_, c2_, c3_, q_}, AttentionMode::kIsolated);
  const double same = MaxDiff(
      base, Reused({&s1, &o1, &o2, &o3}, {sys1_, c1_, c2_, c3_, q_}, AttentionMode::kIsolated, 1));
  EXPECT_LE(same, 1e-4);

  auto reordered = Scratch({sys1_, c3_, c1_, c2_, q_}, AttentionMode::kIsolated);
  EXPECT_GT(MaxDiff(base, reordered), 1e-3) << "the order must matter, or this test proves nothing";
  const double moved = MaxDiff(reordered, Reused({&s1, &o3, &o1, &o2}, {sys1_, c3_, c1_, c2_, q_},
                                                 AttentionMode::kIsolated, 2));
  EXPECT_LE(moved, 1e-4);

  auto other_sys = Scratch({sys2_, c1_, c2_, c3_, q_}, AttentionMode::kIsolated);
  const double swapped = MaxDiff(other_sys, Reused({&s2, &o1, &o2, &o3}, {sys2_, c1_, c2_, c3_, q_},
                                                   AttentionMode::kIsolated, 3));
  EXPECT_LE(swapped, 1e-4);
  std::cout << "isolated reuse: max |logit error| " << same << " (as computed), " << moved
            << " (reordered), " << swapped << " (other system prompt)\n";
}

// A model whose layers differ as Gemma-3's and Llama-4's do: a local layer
// with its own unscaled base, a global one with linear scaling, a NoPE layer.
class PerLayerExactnessTest : public ExactnessTest {
 protected:
  PerLayerExactnessTest() : ExactnessTest(PerLayerConfig()) {}
  static ModelConfig PerLayerConfig() {
    ModelConfig c = Config();
    c.layers = 3;
    RopeSpec global = c.rope.main(), local = c.rope.main();
    global.theta = 1e6;
    global.scaling = RopeScaling::kLinear;
    global.factor = 8;
    c.rope = *RopePlan::PerLayer({global, local}, {1, 0, RopePlan::kNoRope});
    return c;
  }
};

TEST_F(PerLayerExactnessTest, EveryLayerByItsOwnRopeGivesTheSameLogits) {
  auto s1 = Isolated(sys1_, 1000), o1 = Isolated(c1_, 2000), o2 = Isolated(c2_, 70000);
  auto base = Scratch({sys1_, c1_, c2_, q_}, AttentionMode::kIsolated);
  const double same =
      MaxDiff(base, Reused({&s1, &o1, &o2}, {sys1_, c1_, c2_, q_}, AttentionMode::kIsolated, 7));
  auto reordered = Scratch({sys1_, c2_, c1_, q_}, AttentionMode::kIsolated);
  const double moved = MaxDiff(
      reordered, Reused({&s1, &o2, &o1}, {sys1_, c2_, c1_, q_}, AttentionMode::kIsolated, 8));
  EXPECT_LE(same, 1e-4);
  EXPECT_LE(moved, 1e-4);
  EXPECT_GT(MaxDiff(base, reordered), 1e-3) << "the order must matter, or this test proves nothing";

  // The plan matters: the same weights with one RoPE on every layer answer
  // otherwise, so an engine remapping with the wrong plan would be wrong.
  ModelConfig uniform = model_.config();
  uniform.rope = uniform.rope.main();
  const ReferenceModel other(uniform);
  std::vector<uint32_t> lengths = {uint32_t(sys1_.size()), uint32_t(c1_.size()),
                                   uint32_t(c2_.size()), uint32_t(q_.size())};
  auto meta = *BuildAttentionMetadata(lengths, AttentionMode::kIsolated);
  Tokens all;
  for (const Tokens* t : {&sys1_, &c1_, &c2_, &q_}) all.insert(all.end(), t->begin(), t->end());
  auto logits = other.Forward(all, meta.positions, {},
                              [&](size_t q, size_t k) { return meta.Allowed(q, k); });
  const std::vector<float> tail(logits.end() - q_.size() * model_.config().vocab, logits.end());
  EXPECT_GT(MaxDiff(base, tail), 1e-3);
  std::cout << "per-layer RoPE reuse: max |logit error| " << same << " (as computed), " << moved
            << " (reordered)\n";
}

TEST_F(ExactnessTest, WithoutTheReRotationTheAnswerIsWrong) {
  // Negative control: the same objects, but re-rotated to the wrong place.
  auto s1 = Isolated(sys1_, 1000), o1 = Isolated(c1_, 2000), o2 = Isolated(c2_, 3000),
       o3 = Isolated(c3_, 4000);
  auto base = Scratch({sys1_, c1_, c2_, c3_, q_}, AttentionMode::kIsolated);
  // Claim every chunk was computed at 0: remap then shifts by the wrong amount.
  auto lie = [](std::vector<uint8_t> o) {
    auto h = *ParseChunkHeader(o);
    h.virtual_start = 0;
    auto payload = ChunkPayload(o, h);
    return *BuildChunkObject(h, std::vector<uint8_t>(payload.begin(), payload.end()));
  };
  auto w1 = lie(o1), w2 = lie(o2), w3 = lie(o3);
  EXPECT_GT(MaxDiff(base, Reused({&s1, &w1, &w2, &w3}, {sys1_, c1_, c2_, c3_, q_},
                                 AttentionMode::kIsolated, 4)),
            1e-3);
}

TEST_F(ExactnessTest, PrefixedIsExactOnlyAtTheSameDistanceFromTheSystemPrompt) {
  auto sys = Isolated(sys1_, 100);
  auto c1_after_sys = AfterSystem(sys1_, c1_, 700);  // computed right after sys1
  auto c2_after_sys = AfterSystem(sys1_, c2_, 900);

  // c1 right after the system prompt, as computed: exact.
  auto same = Scratch({sys1_, c1_, q_}, AttentionMode::kPrefixed);
  const double exact =
      MaxDiff(same, Reused({&sys, &c1_after_sys}, {sys1_, c1_, q_}, AttentionMode::kPrefixed, 5));
  EXPECT_LE(exact, 1e-4);

  // c1 after c2: its distance to the system prompt grew, so its KV is stale.
  auto moved = Scratch({sys1_, c2_, c1_, q_}, AttentionMode::kPrefixed);
  const double approx = MaxDiff(moved, Reused({&sys, &c2_after_sys, &c1_after_sys},
                                              {sys1_, c2_, c1_, q_}, AttentionMode::kPrefixed, 6));
  std::cout << "prefixed reuse: max |logit error| " << exact << " at the computed distance, "
            << approx << " with the chunk moved " << c2_.size()
            << " tokens further from the system prompt\n";
  RecordProperty("sys_prefixed_moved_error", std::to_string(approx));
  EXPECT_GT(approx, 1e-3) << "moving a prefixed chunk should change its KV";
}

TEST(AttentionMetadataTest, IsolatedAndPrefixedMasks) {
  std::vector<uint32_t> lengths = {2, 3, 2};  // sys, chunk, question
  auto iso = BuildAttentionMetadata(lengths, AttentionMode::kIsolated, 10);
  ASSERT_TRUE(iso.ok());
  EXPECT_EQ(iso->positions.front(), 10);
  EXPECT_EQ(iso->positions.back(), 16);
  EXPECT_EQ(iso->segment_ids, (std::vector<int32_t>{0, 0, 1, 1, 1, 2, 2}));
  EXPECT_TRUE(iso->Allowed(3, 2));   // chunk sees its own earlier token
  EXPECT_FALSE(iso->Allowed(3, 1));  // but not the system prompt
  EXPECT_FALSE(iso->Allowed(2, 3));  // causal
  EXPECT_TRUE(iso->Allowed(5, 0));   // the question sees everything before it
  EXPECT_FALSE(iso->Allowed(5, 6));
  auto pre = BuildAttentionMetadata(lengths, AttentionMode::kPrefixed);
  EXPECT_TRUE(pre->Allowed(3, 1));  // prefixed: the chunk sees the system prompt
  auto dense = pre->DenseMask();
  EXPECT_EQ(std::count(dense.begin(), dense.end(), 1), 3 + (2 + 1) + (2 + 2) + (2 + 3) + 6 + 7);
  std::vector<uint32_t> empty_chunk = {2, 0, 2};
  EXPECT_EQ(BuildAttentionMetadata(empty_chunk, AttentionMode::kIsolated).code(),
            ErrorCode::kInvalidArgument);
  std::vector<uint32_t> no_question = {2, 3, 0};
  EXPECT_EQ(BuildAttentionMetadata(no_question, AttentionMode::kIsolated).code(),
            ErrorCode::kInvalidArgument);
  std::vector<uint32_t> one = {4};
  EXPECT_EQ(BuildAttentionMetadata(one, AttentionMode::kIsolated).code(),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace pikv::device
