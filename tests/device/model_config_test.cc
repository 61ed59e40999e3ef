// ReadModelConfig: geometry, dtype and RoPE from config.json as the engines
// read them, both layouts, MLA, and the engine's max_model_len.
#include "pikv/device/model_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "device_test_util.h"
#include "pikv/proto/chunk_key.h"

namespace pikv::device {
namespace {

const char* kLlama31 = R"({"architectures":["LlamaForCausalLM"],"hidden_size":4096,
  "num_attention_heads":32,"num_hidden_layers":32,"num_key_value_heads":8,
  "max_position_embeddings":131072,"model_type":"llama","rope_scaling":{"factor":8.0,
  "low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":8192,
  "rope_type":"llama3"},"rope_theta":500000.0,"torch_dtype":"bfloat16"})";

TEST(ModelConfigTest, ReadsTheGeometryAndKvSizeOfAStandardModel) {
  auto m = ReadModelConfig(kLlama31);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->geometry.format, KvFormat::kStandard);
  EXPECT_EQ(m->geometry.num_layers, 32u);
  EXPECT_EQ(m->geometry.num_kv_heads, 8u);
  EXPECT_EQ(m->geometry.head_dim, 128u);
  EXPECT_EQ(m->dtype, DType::kBF16);
  EXPECT_EQ(m->rope.main().style, RopeStyle::kNeox);
  EXPECT_EQ(m->KvBytesPerToken(), 128u << 10);  // 4 K tokens: 512 MiB
  ModelConfigOptions f16_kv;
  f16_kv.dtype = DType::kF16;
  auto f16 = ReadModelConfig(kLlama31, f16_kv);
  ASSERT_TRUE(f16.ok());
  EXPECT_EQ(f16->dtype, DType::kF16);
}

TEST(ModelConfigTest, TheNewerRopeParametersLayoutReadsTheSame) {
  const char* newer = R"({"hidden_size":4096,"num_attention_heads":32,"num_hidden_layers":32,
    "num_key_value_heads":8,"max_position_embeddings":131072,"model_type":"llama",
    "rope_parameters":{"rope_theta":500000.0,"factor":8.0,"low_freq_factor":1.0,
    "high_freq_factor":4.0,"original_max_position_embeddings":8192,"rope_type":"llama3"},
    "dtype":"bfloat16"})";
  auto a = ReadModelConfig(kLlama31), b = ReadModelConfig(newer);
  ASSERT_TRUE(a.ok() && b.ok()) << b.status().ToString();
  EXPECT_EQ(a->rope.Signature(), b->rope.Signature());
  auto plain = ReadModelConfig(R"({"num_hidden_layers":2,"head_dim":64,"num_attention_heads":4,
    "num_key_value_heads":2,"torch_dtype":"float32",
    "rope_parameters":{"rope_type":"default","rope_theta":1000000.0}})");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->rope.main().scaling, RopeScaling::kNone);
  EXPECT_EQ(plain->rope.main().theta, 1e6);
}

TEST(ModelConfigTest, PlacesTheRopePartOfMlaAfterTheLatent) {
  // DeepSeek-V3's attention fields: hidden/heads would say 56.
  auto m = ReadModelConfig(R"({"model_type":"deepseek_v3","hidden_size":7168,
    "num_attention_heads":128,"num_hidden_layers":61,"num_key_value_heads":128,
    "kv_lora_rank":512,"q_lora_rank":1536,"qk_nope_head_dim":128,"qk_rope_head_dim":64,
    "v_head_dim":128,"max_position_embeddings":163840,"rope_theta":10000,"rope_scaling":{
    "beta_fast":32,"beta_slow":1,"factor":40,"mscale":1.0,"mscale_all_dim":1.0,
    "original_max_position_embeddings":4096,"type":"yarn"},"torch_dtype":"bfloat16"})");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->geometry.format, KvFormat::kMla);
  EXPECT_EQ(m->geometry.num_kv_heads, 1u);
  EXPECT_EQ(m->geometry.head_dim, 576u);
  EXPECT_EQ(m->geometry.latent_dim, 512u);
  EXPECT_EQ(m->rope.main().rope_offset, 512u);
  EXPECT_EQ(m->rope.main().rotary_dim, 64u);
  EXPECT_EQ(m->rope.main().style, RopeStyle::kGptj);  // DeepSeek pairs interleaved
  EXPECT_DOUBLE_EQ(m->rope.main().AttentionScale(), 1.0);
  EXPECT_EQ(m->KvBytesPerToken(), 61u * 576 * 2);
}

TEST(ModelConfigTest, TheEnginesMaxModelLenPicksLongRopeFactors) {
  std::string longs, shorts;
  for (int i = 0; i < 48; ++i) {
    longs += (i ? "," : "") + std::to_string(2.0 + i);
    shorts += (i ? "," : "") + std::string("1.5");
  }
  const std::string phi3 =
      R"({"model_type":"phi3","hidden_size":3072,"num_attention_heads":32,
      "num_hidden_layers":32,"num_key_value_heads":32,"max_position_embeddings":131072,
      "original_max_position_embeddings":4096,"rope_theta":10000.0,"torch_dtype":"bfloat16",
      "rope_scaling":{"type":"longrope","long_factor":[)" +
      longs + R"(],"short_factor":[)" + shorts + "]}}";
  auto full = ReadModelConfig(phi3);
  ModelConfigOptions engine;
  engine.max_model_len = 4096;
  auto short_ctx = ReadModelConfig(phi3, engine);
  ASSERT_TRUE(full.ok() && short_ctx.ok()) << full.status().ToString();
  const double inv0 = 1.0;                                                       // theta^0
  EXPECT_DOUBLE_EQ(full->rope.main().InverseFrequencies()[0], inv0 / 2.0);       // long
  EXPECT_DOUBLE_EQ(short_ctx->rope.main().InverseFrequencies()[0], inv0 / 1.5);  // short
  // The magnitude follows the config's extension in both, as in the engines.
  const double mscale = std::sqrt(1 + std::log(32.0) / std::log(4096.0));
  EXPECT_NEAR(full->rope.main().AttentionScale(), mscale, 1e-15);
  EXPECT_NEAR(short_ctx->rope.main().AttentionScale(), mscale, 1e-15);
  EXPECT_NE(full->rope.Signature(), short_ctx->rope.Signature());
}

TEST(ModelConfigTest, RefusesNamingTheFileAndTheKey) {
  auto dynamic = ReadModelConfig(R"({"num_hidden_layers":2,"head_dim":64,
    "torch_dtype":"bfloat16","rope_scaling":{"type":"dynamic","factor":2.0}})",
                                 {}, "models/x/config.json");
  EXPECT_EQ(dynamic.code(), ErrorCode::kUnsupported);
  EXPECT_EQ(dynamic.status().message().rfind("models/x/config.json: ", 0), 0u)
      << dynamic.status().ToString();
  auto no_dtype = ReadModelConfig(R"({"num_hidden_layers":2,"head_dim":64})");
  EXPECT_EQ(no_dtype.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(no_dtype.status().message().find("torch_dtype"), std::string::npos);
  auto int8 = ReadModelConfig(R"({"num_hidden_layers":2,"head_dim":64,"torch_dtype":"int8"})");
  EXPECT_EQ(int8.code(), ErrorCode::kUnsupported);
  auto no_layers = ReadModelConfig(R"({"head_dim":64,"torch_dtype":"bfloat16"})");
  EXPECT_NE(no_layers.status().message().find("num_hidden_layers"), std::string::npos);
  auto gqa = ReadModelConfig(R"({"num_hidden_layers":2,"hidden_size":512,
    "num_attention_heads":8,"num_key_value_heads":3,"torch_dtype":"bfloat16"})");
  EXPECT_EQ(gqa.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(ReadModelConfig("[1,2]").code(), ErrorCode::kInvalidArgument);
  // Found by fuzz_model_config: a float far out of range was cast to an
  // unsigned count (undefined behaviour, UBSan aborts).
  auto huge = ReadModelConfig(R"({"num_hidden_layers":2,"head_dim":64,"torch_dtype":"bfloat16",
    "rope_scaling":{"rope_type":"llama3","factor":8.0,"original_max_position_embeddings":1e30}})");
  EXPECT_EQ(huge.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(huge.status().message().find("original_max_position_embeddings"), std::string::npos)
      << huge.status().ToString();
  // Per-layer plans are sized by the layer count: bounded as chunk objects are.
  auto deep = ReadModelConfig(R"({"model_type":"gemma3_text","num_hidden_layers":4000000000,
    "torch_dtype":"bfloat16"})");
  EXPECT_EQ(deep.code(), ErrorCode::kInvalidArgument);
  auto fractional = ReadModelConfig(R"({"num_hidden_layers":32.5,"head_dim":64,
    "num_attention_heads":4,"torch_dtype":"bfloat16"})");
  EXPECT_EQ(fractional.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(fractional.status().message().find("num_hidden_layers must be"), std::string::npos)
      << fractional.status().ToString();
}

// The published configs under tests/device/model_configs (their sources:
// SOURCES.md there). Remapping a chunk of each model's K, both forms, in every
// dtype, to positions up to 1 M, equals the engine's encoding at the actual
// position within one rounding. The float64 reference of what is derived from
// them is tests/device/model_config_reference.py (CTest ModelConfigReference).
std::vector<std::filesystem::path> PublishedConfigs() {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(PIKV_MODEL_CONFIG_DIR))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(PublishedConfigTest, EveryModelRemapsToTheEnginesEncoding) {
  using namespace testing;
  const auto files = PublishedConfigs();
  ASSERT_GE(files.size(), 21u);
  std::vector<Backend> backends = {Backend::kPortable};
  if (Avx2Available()) backends.push_back(Backend::kAvx2);
  for (const auto& file : files) {
    SCOPED_TRACE(file.filename().string());
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    ModelConfigOptions options;
    options.dtype = DType::kF32;  // GPT-J and gpt-oss name none; every dtype is checked below
    auto model = ReadModelConfig(text.str(), options, file.string());
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    for (auto dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (auto form : {KForm::kRotated, KForm::kPreRope}) {
        for (auto [v, a] : {std::pair<int64_t, int64_t>{0, 4096},
                            {1000, 3},
                            {0, 1000000},
                            {1000000, 17},
                            {131000, 999990}}) {
          for (auto b : backends) {
            CheckRemapMatchesEncoding(model->rope, model->geometry.format, {dtype, form, v, a, b});
            if (::testing::Test::HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// Every field of a published config's rope_scaling (and rope_theta) that
// pikv reads changes the chunk key namespace when it changes, or makes the
// config refused: two deployments that encode differently never share keys.
// The signature also fits a chunk header (LongRoPE's factors are a digest).
TEST(PublishedConfigTest, ChangingAnyScalingFieldChangesTheKeyNamespace) {
  using json = nlohmann::json;
  auto key_of = [](const ModelSpec& m) {
    KeyNamespace ns{
        "model", m.geometry.format, m.dtype, m.rope.Signature(), AttentionMode::kIsolated, {}};
    const int32_t tokens[] = {1, 2, 3};
    return MakeChunkKey(ns, tokens);
  };
  ModelConfigOptions options;
  options.dtype = DType::kBF16;
  size_t perturbed = 0;
  for (const auto& file : PublishedConfigs()) {
    SCOPED_TRACE(file.filename().string());
    std::ifstream in(file);
    const json config = json::parse(in);
    auto base = ReadModelConfig(config.dump(), options);
    ASSERT_TRUE(base.ok()) << base.status().ToString();
    EXPECT_LE(base->rope.Signature().size(), ChunkLimits{}.max_rope_spec);
    // The text model's keys (nested in text_config for a multimodal config),
    // including the per-layer ones.
    const std::string root = config.contains("text_config") ? "/text_config" : "";
    const json& text = config.contains("text_config") ? config["text_config"] : config;
    std::vector<json::json_pointer> fields;
    for (const char* key : {"rope_theta", "rope_local_base_freq", "sliding_window_pattern"})
      fields.emplace_back(root + "/" + key);
    // A listed no_rope_layers wins over the interval (which then says nothing).
    if (text.contains("no_rope_layers") && text["no_rope_layers"].size() > 3)
      fields.emplace_back(root + "/no_rope_layers/3");
    else
      fields.emplace_back(root + "/no_rope_layer_interval");
    if (text.contains("rope_scaling") && text["rope_scaling"].is_object()) {
      for (const auto& [key, value] : text["rope_scaling"].items()) {
        // LongRoPE encodes with one of its two lists (long: this deployment
        // is longer than the original length); the other does not matter.
        const bool long_list =
            base->rope.main().max_position > base->rope.main().original_max_position;
        if (key == (long_list ? "short_factor" : "long_factor")) continue;
        if (value.is_array()) {
          fields.emplace_back(root + "/rope_scaling/" + key + "/" +
                              std::to_string(value.size() / 2));
        } else if (value.is_number() || value.is_boolean()) {
          fields.emplace_back(root + "/rope_scaling/" + key);
        }
      }
    }
    for (const auto& field : fields) {
      if (!config.contains(field)) continue;
      SCOPED_TRACE(field.to_string());
      json changed = config;
      json& v = changed[field];
      if (v.is_boolean()) {
        v = !v.get<bool>();
      } else if (field.to_string().find("no_rope_layers") != std::string::npos) {
        v = 1 - v.get<int>();  // that layer rotates, or no longer does
      } else if (v.is_number_integer()) {
        v = v.get<int64_t>() * 2;
      } else {
        v = v.get<double>() * 1.01;
      }
      auto other = ReadModelConfig(changed.dump(), options);
      ++perturbed;
      if (!other.ok()) continue;  // refused: never shares keys either
      EXPECT_NE(other->rope.Signature(), base->rope.Signature());
      EXPECT_NE(key_of(*other), key_of(*base));
    }
  }
  EXPECT_GT(perturbed, 55u);  // the check ran over the scaling fields, not nothing
}

}  // namespace
}  // namespace pikv::device
