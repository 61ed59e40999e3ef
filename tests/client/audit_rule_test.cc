// Audits judge like with like: a chunk an honest engine stored at one
// position (or pre-RoPE) passes an audit recomputed at another, by another
// kernel, for every real model's RoPE; poison the old rule (each block's
// largest difference against 4 steps of its largest value, positions
// ignored) let through is caught.
#include "pikv/client/audit_rule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

#include "honest_kv.h"
#include "pikv/device/model_config.h"
#include "pikv/proto/chunk_object.h"

namespace pikv::client {
namespace {

using testing::Element;
using testing::HonestChunk;
using testing::HonestKernel;
using testing::HonestPayload;
using testing::SetElement;

// A model's geometry and RoPE, cut to a small chunk (every layer kept: a
// per-layer plan names each).
struct Model {
  device::RopePlan rope;
  HonestChunk chunk;
};

Model SmallModel() {
  device::RopeSpec spec;
  spec.head_dim = spec.rotary_dim = 64;
  return {spec, HonestChunk{}};
}

Model FromConfig(const std::string& name) {
  std::ifstream in(std::string(PIKV_SOURCE_DIR) + "/tests/device/model_configs/" + name + ".json");
  std::stringstream json;
  json << in.rdbuf();
  device::ModelConfigOptions options;
  options.dtype = DType::kBF16;  // GPT-J's config names none
  auto spec = device::ReadModelConfig(json.str(), options);
  EXPECT_TRUE(spec.ok()) << name << ": " << spec.status().ToString();
  Model m{spec->rope, {}};
  m.chunk.layers = spec->geometry.num_layers;
  m.chunk.tokens = 8;
  m.chunk.kv_heads = 1;
  m.chunk.head_dim = spec->geometry.head_dim;
  m.chunk.hidden = 64;
  return m;
}

std::vector<uint8_t> Object(const Model& m, DType dtype, KForm k_form, int64_t virtual_start,
                            std::span<const uint8_t> payload) {
  ChunkHeader h;
  h.model_id = "m";
  h.geometry = {m.chunk.layers,   m.chunk.tokens, m.chunk.kv_heads,
                m.chunk.head_dim, dtype,          KvFormat::kStandard};
  device::SetHeaderRope(m.rope, h);
  h.k_form = k_form;
  h.virtual_start = virtual_start;
  h.writer = "writer";
  h.tokens.assign(m.chunk.tokens, 7);
  h.key = KeyOfContent(h);
  auto object = BuildChunkObject(h, payload);
  EXPECT_TRUE(object.ok()) << object.status().ToString();
  return *object;
}

class AuditTest : public ::testing::TestWithParam<DType> {
 protected:
  DType dtype() const { return GetParam(); }
  AuditFinding Audit(const Model& m, const std::vector<uint8_t>& object,
                     const std::vector<uint8_t>& recomputed, RecomputedForm form = {}) {
    auto f = CompareWithRecomputed(object, recomputed, m.rope, form);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? *f : AuditFinding{};
  }
};

// The defect: an honest chunk cut out of a longer prompt (stored at
// virtual_start 1000) failed an audit recomputed alone at 0, and its writer
// was counted as a poisoner.
TEST_P(AuditTest, AnHonestChunkStoredAtPosition1000PassesAnAuditRecomputedAt0) {
  const Model m = SmallModel();
  for (int64_t start : {0, 1000, 32000}) {
    const auto stored =
        HonestPayload(m.chunk, m.rope, dtype(), KForm::kRotated, start, HonestKernel::kFmaInOrder);
    const auto object = Object(m, dtype(), KForm::kRotated, start, stored);
    for (HonestKernel kernel : {HonestKernel::kFmaInOrder, HonestKernel::kNoFmaReversed,
                                HonestKernel::kDoubleAccumulate}) {
      const auto at0 = HonestPayload(m.chunk, m.rope, dtype(), KForm::kRotated, 0, kernel);
      const AuditFinding f = Audit(m, object, at0);
      EXPECT_TRUE(f.match) << "stored at " << start << ", recomputed at 0 by "
                           << testing::KernelName(kernel) << ": " << f.worst << " / " << f.worst_l2
                           << " in " << f.where;
      // Recomputed at the object's own positions: compared as it is.
      const auto there = HonestPayload(m.chunk, m.rope, dtype(), KForm::kRotated, start, kernel);
      EXPECT_TRUE(Audit(m, object, there, {KForm::kRotated, start}).match) << start;
    }
  }
}

TEST_P(AuditTest, PreRopeObjectsAndPreRopeRecomputationsAreBroughtToOneForm) {
  const Model m = SmallModel();
  const auto pre =
      HonestPayload(m.chunk, m.rope, dtype(), KForm::kPreRope, 0, HonestKernel::kDoubleAccumulate);
  const auto rotated =
      HonestPayload(m.chunk, m.rope, dtype(), KForm::kRotated, 500, HonestKernel::kNoFmaReversed);
  // A pre-RoPE object against keys rotated at 500, and the other way round.
  EXPECT_TRUE(
      Audit(m, Object(m, dtype(), KForm::kPreRope, 0, pre), rotated, {KForm::kRotated, 500}).match);
  EXPECT_TRUE(
      Audit(m, Object(m, dtype(), KForm::kRotated, 500, rotated), pre, {KForm::kPreRope, 0}).match);
  EXPECT_TRUE(
      Audit(m, Object(m, dtype(), KForm::kPreRope, 0, pre), pre, {KForm::kPreRope, 0}).match);
  // Keys rotated at 500 are not keys rotated at 0: that is still a mismatch.
  const AuditFinding wrong =
      Audit(m, Object(m, dtype(), KForm::kRotated, 0, rotated), pre, {KForm::kPreRope, 0});
  EXPECT_FALSE(wrong.match);
  EXPECT_EQ(wrong.where.substr(wrong.where.size() - 1), "K");
}

// Every real model's RoPE (scalings, partial rotary, interleaved pairs,
// per-layer specs, NoPE layers): honest at 1000 passes against 0.
TEST_P(AuditTest, EveryRealModelsRopeAuditsLikeWithLike) {
  for (const char* name : {"llama-3.1-8b", "phi-2", "gpt-j-6b", "qwen2.5-7b-instruct-yarn",
                           "phi-3-mini-128k-instruct", "gemma-3-1b-it", "smollm3-3b"}) {
    const Model m = FromConfig(name);
    const auto stored =
        HonestPayload(m.chunk, m.rope, dtype(), KForm::kRotated, 1000, HonestKernel::kFmaInOrder);
    const auto at0 =
        HonestPayload(m.chunk, m.rope, dtype(), KForm::kRotated, 0, HonestKernel::kNoFmaReversed);
    const AuditFinding f = Audit(m, Object(m, dtype(), KForm::kRotated, 1000, stored), at0);
    EXPECT_TRUE(f.match) << name << ": " << f.worst << " / " << f.worst_l2 << " in " << f.where;
  }
}

// The defect: the tolerance was relative to each block's largest value, so
// elements far smaller than it could change by large relative amounts.
TEST_P(AuditTest, SmallValuedPoisonIsCaught) {
  const Model m = SmallModel();
  const auto honest =
      HonestPayload(m.chunk, m.rope, dtype(), KForm::kRotated, 0, HonestKernel::kFmaInOrder);
  auto poisoned = honest;
  const size_t block = size_t{m.chunk.tokens} * m.chunk.kv_heads * m.chunk.head_dim;
  const size_t v0 = block;  // layer 0's V
  float largest = 0;
  for (size_t i = v0; i < v0 + block; ++i)
    largest = std::max(largest, std::fabs(Element(honest, dtype(), i)));
  // Every value under 1/256 of the block's largest negated and doubled: no
  // element moves by more than 3/256 of the largest, under the old rule's
  // 4 steps (4/256 in bf16).
  size_t changed = 0;
  for (size_t i = v0; i < v0 + block; ++i) {
    const float x = Element(honest, dtype(), i);
    if (std::fabs(x) < largest / 256 && x != 0) SetElement(poisoned, dtype(), i, -2 * x), ++changed;
  }
  ASSERT_GT(changed, 0u);
  const AuditFinding f = Audit(
      m, Object(m, dtype(), KForm::kRotated, 0, poisoned),
      HonestPayload(m.chunk, m.rope, dtype(), KForm::kRotated, 0, HonestKernel::kNoFmaReversed));
  EXPECT_FALSE(f.match) << changed << " values changed";
  EXPECT_EQ(f.where, "layer 0 V");
  EXPECT_EQ(f.writer, "writer");
}

TEST_P(AuditTest, OneSignFlipOrOneLayerShiftedIsCaught) {
  const Model m = SmallModel();
  const auto honest =
      HonestPayload(m.chunk, m.rope, dtype(), KForm::kRotated, 1000, HonestKernel::kFmaInOrder);
  const auto at0 =
      HonestPayload(m.chunk, m.rope, dtype(), KForm::kRotated, 0, HonestKernel::kDoubleAccumulate);
  const size_t block = size_t{m.chunk.tokens} * m.chunk.kv_heads * m.chunk.head_dim;
  // One element of layer 1's V, then of its K (rotated: judged after the
  // re-rotation), negated (one whose value is not near zero).
  for (const auto& [plane, where] : {std::pair{3, "layer 1 V"}, std::pair{2, "layer 1 K"}}) {
    auto flipped = honest;
    size_t at = plane * block;
    while (std::fabs(Element(honest, dtype(), at)) < 0.05f) ++at;
    SetElement(flipped, dtype(), at, -Element(honest, dtype(), at));
    const AuditFinding f1 = Audit(m, Object(m, dtype(), KForm::kRotated, 1000, flipped), at0);
    EXPECT_FALSE(f1.match) << where;
    EXPECT_EQ(f1.where, where);
  }
  // Layer 0's V shifted by 2 % of its RMS.
  auto shifted = honest;
  double sum = 0;
  for (size_t i = block; i < 2 * block; ++i) sum += std::pow(Element(honest, dtype(), i), 2);
  const float shift = 0.02f * static_cast<float>(std::sqrt(sum / block));
  for (size_t i = block; i < 2 * block; ++i)
    SetElement(shifted, dtype(), i, Element(honest, dtype(), i) + shift);
  EXPECT_FALSE(Audit(m, Object(m, dtype(), KForm::kRotated, 1000, shifted), at0).match);
}

TEST_P(AuditTest, ValuesNotFiniteOnOneSideAreAMismatch) {
  const Model m = SmallModel();
  const auto honest =
      HonestPayload(m.chunk, m.rope, dtype(), KForm::kRotated, 0, HonestKernel::kFmaInOrder);
  auto poisoned = honest;
  SetElement(poisoned, dtype(), 10, std::nanf(""));
  EXPECT_FALSE(Audit(m, Object(m, dtype(), KForm::kRotated, 0, poisoned), honest).match);
  EXPECT_TRUE(Audit(m, Object(m, dtype(), KForm::kRotated, 0, poisoned), poisoned).match);
}

// What the object's header says of its RoPE is the writer's word: a shape
// other than the engine's (which would pair other elements, or read past
// the rotation tables), or positions so far that fp32 RoPE allows anything,
// is not judged: not comparable, not a match (not used), nothing reported.
TEST_P(AuditTest, AnotherRopeOrAnotherSizeIsNotComparable) {
  const Model m = SmallModel();
  const auto honest =
      HonestPayload(m.chunk, m.rope, dtype(), KForm::kRotated, 0, HonestKernel::kFmaInOrder);
  const auto object = Object(m, dtype(), KForm::kRotated, 0, honest);
  device::RopeSpec other = m.rope.main();
  other.theta = 500000;
  auto another = CompareWithRecomputed(object, honest, other);
  ASSERT_TRUE(another.ok());
  EXPECT_FALSE(another->comparable);
  EXPECT_FALSE(another->match);
  EXPECT_EQ(CompareWithRecomputed(object, std::span(honest).first(honest.size() - 2), m.rope)
                .status()
                .code(),
            ErrorCode::kInvalidArgument);
  // A header claiming another rotary width or pairing, same signature.
  for (const auto& change : std::vector<std::function<void(ChunkHeader&)>>{
           [](ChunkHeader& h) { h.rotary_dim = 32; },
           [](ChunkHeader& h) { h.rope_style = RopeStyle::kGptj; },
           [](ChunkHeader& h) { h.virtual_start = int64_t{1} << 40; },
           [](ChunkHeader& h) { h.virtual_start = INT64_MIN; }}) {
    auto h = *ParseChunkHeader(object);
    change(h);
    auto forged = BuildChunkObject(h, ChunkPayload(object, *ParseChunkHeader(object)));
    ASSERT_TRUE(forged.ok()) << forged.status().ToString();
    auto f = CompareWithRecomputed(*forged, honest, m.rope);
    ASSERT_TRUE(f.ok());
    EXPECT_FALSE(f->comparable) << f->where << " vs " << h.virtual_start;
    EXPECT_FALSE(f->match);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AuditTest,
                         ::testing::Values(DType::kBF16, DType::kF16, DType::kF32),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

}  // namespace
}  // namespace pikv::client
