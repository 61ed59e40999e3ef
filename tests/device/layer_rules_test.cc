// Per-layer RoPE plans read from configs: each family's rule, what is
// refused by name, the plan's signature, and remap per layer (each layer by
// its own spec, NoPE layers copied) with a check shown to bite.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "device_test_util.h"
#include "pikv/device/model_config.h"
#include "pikv/device/rope_plan.h"

namespace pikv::device {
namespace {

using testing::CompareRemapWithEncoding;
using testing::RemapCase;

// A small text config of `model_type` with `extra` keys (a JSON fragment).
std::string Config(const std::string& model_type, int layers, const std::string& extra = "") {
  return R"({"model_type":")" + model_type + R"(","num_hidden_layers":)" + std::to_string(layers) +
         R"(,"head_dim":64,"num_attention_heads":4,"num_key_value_heads":2,)"
         R"("torch_dtype":"bfloat16","rope_theta":1000000.0)" +
         (extra.empty() ? "" : "," + extra) + "}";
}

// Each layer's spec index, -1 for NoPE.
std::vector<int> Map(const ModelSpec& m) {
  std::vector<int> map;
  for (uint32_t l = 0; l < m.geometry.num_layers; ++l) map.push_back(m.rope.SpecIndex(l));
  return map;
}

TEST(LayerRulesTest, Gemma3LocalLayersUseTheirOwnBaseUnscaled) {
  auto m = ReadModelConfig(Config("gemma3_text", 12,
                                  R"("sliding_window":512,"rope_local_base_freq":10000.0,)"
                                  R"("rope_scaling":{"rope_type":"linear","factor":8.0})"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  // Every sixth layer (5, 11) is global: the main spec; the rest slide.
  EXPECT_EQ(Map(*m), (std::vector<int>{1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 0}));
  ASSERT_EQ(m->rope.specs().size(), 2u);
  EXPECT_EQ(m->rope.specs()[0].theta, 1e6);
  EXPECT_EQ(m->rope.specs()[0].scaling, RopeScaling::kLinear);
  EXPECT_EQ(m->rope.specs()[1].theta, 1e4);
  EXPECT_EQ(m->rope.specs()[1].scaling, RopeScaling::kNone);
  EXPECT_EQ(m->attention[0], (LayerAttention{AttentionSpan::kSliding, 512}));
  EXPECT_EQ(m->attention[5], (LayerAttention{AttentionSpan::kFull, 0}));

  // layer_types wins over the period; a pattern of 2 the other way.
  auto typed = ReadModelConfig(Config("gemma3_text", 3,
                                      R"("sliding_window":512,"sliding_window_pattern":6,)"
                                      R"("layer_types":["full_attention","sliding_attention",)"
                                      R"("full_attention"])"));
  ASSERT_TRUE(typed.ok()) << typed.status().ToString();
  EXPECT_EQ(Map(*typed), (std::vector<int>{0, 1, 0}));
  auto two = ReadModelConfig(Config("gemma3_text", 4, R"("sliding_window_pattern":2)"));
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(Map(*two), (std::vector<int>{1, 0, 1, 0}));
}

TEST(LayerRulesTest, Gemma3FromTheNewerLayoutAndFromAMultimodalConfig) {
  // transformers v5: one rope_parameters block per layer type.
  auto v5 = ReadModelConfig(Config("gemma3_text", 6,
                                   R"("sliding_window":512,"rope_parameters":{)"
                                   R"("full_attention":{"rope_type":"linear","factor":8.0,)"
                                   R"("rope_theta":1000000.0},"sliding_attention":{)"
                                   R"("rope_type":"default","rope_theta":10000.0}})"));
  auto v4 = ReadModelConfig(Config("gemma3_text", 6,
                                   R"("sliding_window":512,"rope_local_base_freq":10000.0,)"
                                   R"("rope_scaling":{"rope_type":"linear","factor":8.0})"));
  ASSERT_TRUE(v5.ok()) << v5.status().ToString();
  ASSERT_TRUE(v4.ok()) << v4.status().ToString();
  EXPECT_EQ(v5->rope.Signature(), v4->rope.Signature());

  // A Gemma-3 4B style multimodal config: the text part nested, sparse
  // (class defaults: rope_theta 1e6, head_dim 256, 8 heads over 4 KV heads).
  // transformers writes rope_scaling: null beside rope_parameters: absent.
  auto with_null = ReadModelConfig(Config("gemma3_text", 6,
                                          R"("sliding_window":512,"rope_scaling":null,)"
                                          R"("rope_parameters":{"full_attention":{)"
                                          R"("rope_type":"linear","factor":8.0,)"
                                          R"("rope_theta":1000000.0},"sliding_attention":{)"
                                          R"("rope_type":"default","rope_theta":10000.0}})"));
  ASSERT_TRUE(with_null.ok()) << with_null.status().ToString();
  EXPECT_EQ(with_null->rope.Signature(), v4->rope.Signature());
  auto both = ReadModelConfig(Config("llama", 2,
                                     R"("rope_scaling":{"rope_type":"linear","factor":2.0},)"
                                     R"("rope_parameters":{"rope_type":"default"})"));
  EXPECT_EQ(both.code(), ErrorCode::kInvalidArgument);
  auto not_object = ReadModelConfig(Config("gemma3_text", 6,
                                           R"("sliding_window":512,"rope_parameters":{)"
                                           R"("full_attention":{"rope_type":"default"},)"
                                           R"("sliding_attention":7})"));
  EXPECT_EQ(not_object.code(), ErrorCode::kInvalidArgument);

  auto nested = ReadModelConfig(R"({"model_type":"gemma3","torch_dtype":"bfloat16",
    "text_config":{"model_type":"gemma3_text","hidden_size":2560,"num_hidden_layers":34,
    "rope_scaling":{"factor":8.0,"rope_type":"linear"},"sliding_window":1024}})");
  ASSERT_TRUE(nested.ok()) << nested.status().ToString();
  EXPECT_EQ(nested->model_type, "gemma3_text");
  EXPECT_EQ(nested->dtype, DType::kBF16);
  EXPECT_EQ(nested->geometry.head_dim, 256u);
  EXPECT_EQ(nested->geometry.num_kv_heads, 4u);
  EXPECT_EQ(nested->rope.main().theta, 1e6);
  EXPECT_EQ(nested->rope.specs().at(1).theta, 1e4);
  int global = 0;
  for (int s : Map(*nested)) global += s == 0;
  EXPECT_EQ(global, 5);  // 5, 11, 17, 23, 29 of 34
}

TEST(LayerRulesTest, Llama4AndSmolLM3LeaveEveryFourthLayerUnrotated) {
  auto interval = ReadModelConfig(Config("llama4_text", 8, R"("no_rope_layers":[])"));
  ASSERT_TRUE(interval.ok()) << interval.status().ToString();
  EXPECT_EQ(Map(*interval), (std::vector<int>{0, 0, 0, -1, 0, 0, 0, -1}));
  auto listed = ReadModelConfig(Config("smollm3", 4, R"("no_rope_layers":[1,0,1,1])"));
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(Map(*listed), (std::vector<int>{0, -1, 0, 0}));
  auto every_third = ReadModelConfig(Config("smollm3", 6, R"("no_rope_layer_interval":3)"));
  ASSERT_TRUE(every_third.ok()) << every_third.status().ToString();
  EXPECT_EQ(Map(*every_third), (std::vector<int>{0, 0, -1, 0, 0, -1}));
  // Llama-4's RoPE layers attend within chunks, its NoPE layers globally.
  auto chunked = ReadModelConfig(Config("llama4_text", 4, R"("attention_chunk_size":8192)"));
  ASSERT_TRUE(chunked.ok()) << chunked.status().ToString();
  EXPECT_EQ(chunked->attention[0], (LayerAttention{AttentionSpan::kChunked, 8192}));
  EXPECT_EQ(chunked->attention[3], (LayerAttention{AttentionSpan::kFull, 0}));
  // SmolLM3 keeps an empty list as given: no entry for any layer.
  auto empty = ReadModelConfig(Config("smollm3", 4, R"("no_rope_layers":[])"));
  EXPECT_EQ(empty.code(), ErrorCode::kInvalidArgument);
}

TEST(LayerRulesTest, Cohere2RotatesItsSlidingLayersOnlyInterleaved) {
  auto m = ReadModelConfig(Config("cohere2", 8, R"("sliding_window":4096)"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(Map(*m), (std::vector<int>{0, 0, 0, -1, 0, 0, 0, -1}));
  EXPECT_EQ(m->rope.main().style, RopeStyle::kGptj);
  EXPECT_EQ(m->attention[3].span, AttentionSpan::kFull);
  EXPECT_EQ(m->attention[2].span, AttentionSpan::kSliding);
}

TEST(LayerRulesTest, PerLayerKeysOutsideTheirFamilyAreRefusedByName) {
  for (const char* key :
       {R"("rope_local_base_freq":10000.0)", R"("no_rope_layers":[1,1])",
        R"("no_rope_layer_interval":4)", R"("sliding_window_pattern":6,"sliding_window":64)",
        R"("layer_types":["full_attention","linear_attention"])"}) {
    SCOPED_TRACE(key);
    auto m = ReadModelConfig(Config("llama", 2, key));
    ASSERT_FALSE(m.ok());
    const std::string name = std::string(key).substr(1, std::string(key).find('"', 1) - 1);
    EXPECT_NE(m.status().message().find(name), std::string::npos) << m.status().ToString();
  }
  auto order = ReadModelConfig(
      Config("cohere2", 4, R"("sliding_window":64,"order_of_interleaved_layers":"global_first")"));
  EXPECT_NE(order.status().message().find("order_of_interleaved_layers"), std::string::npos);
  auto bad = ReadModelConfig(Config("llama4_text", 2, R"("no_rope_layers":[1,2])"));
  EXPECT_EQ(bad.code(), ErrorCode::kInvalidArgument);
  auto short_types =
      ReadModelConfig(Config("gemma3_text", 3, R"("layer_types":["full_attention"])"));
  EXPECT_EQ(short_types.code(), ErrorCode::kInvalidArgument);
}

TEST(LayerRulesTest, Llama3ScalingWithEqualFactorsHasNoMediumBand) {
  // Llama-4 Scout: factor 16, low = high = 1, original 8192: a frequency
  // whose wavelength is under 8192 is kept, over it divided by 16.
  auto m = ReadModelConfig(Config("llama4_text", 4,
                                  R"("rope_scaling":{"rope_type":"llama3","factor":16.0,)"
                                  R"("low_freq_factor":1.0,"high_freq_factor":1.0,)"
                                  R"("original_max_position_embeddings":8192})"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const RopeSpec& r = m->rope.main();
  auto inv = r.InverseFrequencies();
  for (uint32_t i = 0; i < inv.size(); ++i) {
    const double plain = std::pow(r.theta, -2.0 * i / r.rotary_dim);
    const double wavelen = 2 * M_PI / plain;
    EXPECT_DOUBLE_EQ(inv[i], wavelen < 8192 ? plain : plain / 16) << i;
  }
  auto inverted = ReadModelConfig(Config("llama", 2,
                                         R"("rope_scaling":{"rope_type":"llama3","factor":8.0,)"
                                         R"("low_freq_factor":4.0,"high_freq_factor":1.0})"));
  EXPECT_EQ(inverted.code(), ErrorCode::kInvalidArgument);
}

TEST(RopePlanTest, SignatureCoversEveryLayerAndKeepsUniformKeys) {
  RopeSpec main, local;
  main.head_dim = main.rotary_dim = local.head_dim = local.rotary_dim = 64;
  main.theta = 1e6;
  local.theta = 1e4;
  // A plan that puts the main spec everywhere is the uniform one.
  auto all_main = RopePlan::PerLayer({main, local}, {0, 0, 0});
  ASSERT_TRUE(all_main.ok());
  EXPECT_TRUE(all_main->uniform());
  EXPECT_EQ(all_main->Signature(), main.Signature());
  auto plan = RopePlan::PerLayer({main, local}, {1, 0, -1});
  ASSERT_TRUE(plan.ok());
  for (auto other : {std::vector<int>{0, 1, -1}, std::vector<int>{1, 0, 0},
                     std::vector<int>{1, 0, -1, 1}, std::vector<int>{1, -1, -1}}) {
    auto changed = RopePlan::PerLayer({main, local}, other);
    ASSERT_TRUE(changed.ok());
    EXPECT_NE(changed->Signature(), plan->Signature());
  }
  EXPECT_LE(plan->Signature().size(), ChunkLimits{}.max_rope_spec);
  EXPECT_TRUE(plan->Validate(3).ok());
  EXPECT_FALSE(plan->Validate(4).ok());  // a plan for 3 layers does not fit 4
  RopeSpec narrow = local;
  narrow.rotary_dim = 32;
  auto mixed = RopePlan::PerLayer({main, narrow}, {0, 1});
  ASSERT_TRUE(mixed.ok());
  EXPECT_FALSE(mixed->Validate(2).ok());  // one shape per plan
  EXPECT_FALSE(RopePlan::PerLayer({main}, {0, 3}).ok());
  EXPECT_EQ(FormatLayers({0, 1, 2, 4, 6, 7}), "0-2,4,6-7");
}

// Remap rotates each layer by its own spec and copies NoPE layers (both K
// forms, every dtype, far positions); the same comparison against an engine
// whose one layer differs finds mismatches, so it would see a wrong plan.
TEST(RopePlanTest, RemapRotatesEachLayerByItsOwnSpecAndTheCheckBites) {
  RopeSpec main, local;
  main.head_dim = main.rotary_dim = local.head_dim = local.rotary_dim = 64;
  main.theta = 1e6;
  main.scaling = RopeScaling::kLinear;
  main.factor = 8;
  local.theta = 1e4;
  auto plan = *RopePlan::PerLayer({main, local}, {1, 0, -1, 1});
  std::vector<Backend> backends = {Backend::kPortable};
  if (Avx2Available()) backends.push_back(Backend::kAvx2);
  for (auto dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (auto form : {KForm::kRotated, KForm::kPreRope}) {
      for (auto b : backends) {
        const RemapCase c{dtype, form, 1000, 999990, b};
        auto same = CompareRemapWithEncoding(plan, plan, KvFormat::kStandard, c);
        EXPECT_EQ(same.mismatches, 0u) << same.first;
        for (auto swapped : {std::vector<int>{0, 0, -1, 1}, std::vector<int>{1, 0, 1, 1},
                             std::vector<int>{1, 0, -1, -1}}) {
          auto engine = *RopePlan::PerLayer({main, local}, swapped);
          auto off = CompareRemapWithEncoding(plan, engine, KvFormat::kStandard, c);
          EXPECT_GT(off.mismatches, 0u) << "a swapped layer went unnoticed";
        }
      }
    }
  }
}

}  // namespace
}  // namespace pikv::device
