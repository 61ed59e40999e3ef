#include "pikv/client/client_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "pikv/coord/find_controllers.h"
#include "test_support.h"

namespace pikv::client {
namespace {

const std::string kConfigs = std::string(PIKV_SOURCE_DIR) + "/tests/device/model_configs/";

TEST(ClientConfigTest, FileModelConfigAndEnvironment) {
  testing::TempDir dir;
  std::ofstream(dir.str() + "/client.yaml")
      << "model-id: llama\nmodel-config: " + kConfigs + "llama-3.1-8b.json\nfetch-timeout: 3s\n";
  setenv("PIKV_FETCH_TIMEOUT", "750ms", 1);
  auto o = LoadClientOptions(dir.str() + "/client.yaml");
  unsetenv("PIKV_FETCH_TIMEOUT");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->model_id, "llama");
  EXPECT_EQ(o->num_layers, 32u);  // geometry, dtype and RoPE from the model config
  EXPECT_EQ(o->num_kv_heads, 8u);
  EXPECT_EQ(o->head_dim, 128u);
  EXPECT_EQ(o->kv_format, KvFormat::kStandard);
  EXPECT_EQ(o->dtype, DType::kBF16);
  EXPECT_EQ(o->rope.main().scaling, device::RopeScaling::kLlama3);
  EXPECT_EQ(o->fetch_timeout.count(), 750);  // the environment wins over the file

  std::ofstream(dir.str() + "/mla.yaml")
      << "model-id: dsv3\ndtype: f16\nmodel-config: " + kConfigs + "deepseek-v3.json\n";
  auto mla = LoadClientOptions(dir.str() + "/mla.yaml");
  ASSERT_TRUE(mla.ok()) << mla.status().ToString();
  EXPECT_EQ(mla->kv_format, KvFormat::kMla);
  EXPECT_EQ(mla->head_dim, 576u);
  EXPECT_EQ(mla->rope.main().rope_offset, 512u);
  EXPECT_EQ(mla->dtype, DType::kF16);  // the setting beats the config's bfloat16
}

// The client library reads no etcd: an etcd:// controller is refused where
// the options are loaded, unless the program passes coord's finder.
TEST(ClientConfigTest, AnEtcdControllerNeedsAProgramThatReadsEtcd) {
  testing::TempDir dir;
  std::ofstream(dir.str() + "/e.yaml")
      << "model-config: " + kConfigs + "llama-3.1-8b.json\ncontroller: etcd://127.0.0.1:1/c\n";
  auto refused = LoadClientOptions(dir.str() + "/e.yaml");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("etcd"), std::string::npos)
      << refused.status().ToString();
  auto taken = LoadClientOptions(dir.str() + "/e.yaml", nullptr, {}, &coord::FindControllers);
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_EQ(taken->find_controllers, &coord::FindControllers);
}

TEST(ClientConfigTest, SizesThatDisagreeWithTheModelConfigAreRefused) {
  testing::TempDir dir;
  std::ofstream(dir.str() + "/a.yaml")
      << "num-kv-heads: 32\nmodel-config: " + kConfigs + "llama-3.1-8b.json\n";
  auto o = LoadClientOptions(dir.str() + "/a.yaml");
  EXPECT_NE(o.status().message().find("num-kv-heads: 32 but"), std::string::npos)
      << o.status().ToString();
  std::ofstream(dir.str() + "/b.yaml") << "model-config: " + kConfigs + "gpt-j-6b.json\n";
  o = LoadClientOptions(dir.str() + "/b.yaml");  // GPT-J names no dtype: pikv does not guess
  EXPECT_NE(o.status().message().find("dtype"), std::string::npos) << o.status().ToString();
}

// Two deployments whose configs differ in one scaling field never share keys;
// the same config read twice does.
TEST(ClientConfigTest, TheKeyNamespaceFollowsTheEncoding) {
  testing::TempDir dir;
  auto key = [&](const std::string& config_path, const std::string& extra) {
    std::ofstream(dir.str() + "/c.yaml") << "model-id: m\nlocal-node: \"\"\ncontroller: \"\"\n"
                                         << "model-config: " << config_path << "\n"
                                         << extra;
    auto o = LoadClientOptions(dir.str() + "/c.yaml");
    EXPECT_TRUE(o.ok()) << o.status().ToString();
    const int32_t tokens[] = {5, 6, 7};
    return Client(*o).KeyOf(tokens);
  };
  const std::string qwen = kConfigs + "qwen2.5-7b-instruct-yarn.json";
  std::ifstream in(qwen);
  std::stringstream text;
  text << in.rdbuf();
  std::string changed = text.str();
  const std::string from = "\"factor\": 4.0", to = "\"factor\": 4.5";
  ASSERT_NE(changed.find(from), std::string::npos);
  changed.replace(changed.find(from), from.size(), to);
  std::ofstream(dir.str() + "/changed.json") << changed;
  EXPECT_EQ(key(qwen, ""), key(qwen, ""));
  EXPECT_NE(key(qwen, ""), key(dir.str() + "/changed.json", ""));
  // LongRoPE: the engine's max_model_len picks the factors, so it splits keys.
  const std::string phi3 = kConfigs + "phi-3-mini-128k-instruct.json";
  EXPECT_NE(key(phi3, "max-model-len: 4096\n"), key(phi3, "max-model-len: 131072\n"));
  EXPECT_EQ(key(phi3, "max-model-len: 131072\n"), key(phi3, ""));
}

TEST(ClientConfigTest, BadValuesNameTheKey) {
  testing::TempDir dir;
  std::ofstream(dir.str() + "/a.yaml") << "dtype: int8\n";
  EXPECT_NE(LoadClientOptions(dir.str() + "/a.yaml").status().message().find("dtype"),
            std::string::npos);
  std::ofstream(dir.str() + "/b.yaml") << "attention-mode: global\n";
  EXPECT_NE(LoadClientOptions(dir.str() + "/b.yaml").status().message().find("attention-mode"),
            std::string::npos);
  std::ofstream(dir.str() + "/c.yaml") << "model: x\n";
  EXPECT_NE(
      LoadClientOptions(dir.str() + "/c.yaml").status().message().find("unknown setting 'model'"),
      std::string::npos);
  std::ofstream(dir.str() + "/d.yaml") << "stream-frame: 4KiB\n";  // under the wire's minimum
  EXPECT_NE(LoadClientOptions(dir.str() + "/d.yaml").status().message().find("stream-frame"),
            std::string::npos);
  EXPECT_TRUE(LoadClientOptions("").ok()) << "defaults alone are valid";
}

TEST(ClientConfigTest, EachCheckedSettingNamesItself) {
  const std::string llama = kConfigs + "llama-3.1-8b.json";
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"audit-rate", "1.5"},
                                                        {"audit-rate", ""},
                                                        {"tenant", "default"},
                                                        {"store-threads", "0"},
                                                        {"max-model-len", "-1"},
                                                        {"num-layers", "-1"},
                                                        {"head-dim", "4294967296"},
                                                        {"stream-frame", "1GiB"}}) {
    auto o = LoadClientOptions("", nullptr, {{"model-config", llama}, {key, value}});
    EXPECT_EQ(o.status().message().rfind(key + ":", 0), 0u) << o.status().ToString();
  }
}

// Each default is written once, in ClientOptions: the settings' defaults are
// its values (the endpoints aside: a program dials this host's, the library none).
TEST(ClientConfigTest, TheSettingsDefaultsAreTheOptionsOwn) {
  auto o = LoadClientOptions("");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  const ClientOptions d;
  EXPECT_EQ(o->node_timeout, d.node_timeout);
  EXPECT_EQ(o->controller_timeout, d.controller_timeout);
  EXPECT_EQ(o->locate_budget, d.locate_budget);
  EXPECT_EQ(o->fetch_timeout, d.fetch_timeout);
  EXPECT_EQ(o->store_threads, d.store_threads);
  EXPECT_EQ(o->stream_frame, d.stream_frame);
  EXPECT_EQ(o->zero_copy, d.zero_copy);
  EXPECT_EQ(o->audit_rate, d.audit_rate);
  EXPECT_EQ(o->mode, d.mode);
  EXPECT_EQ(o->dtype, d.dtype);
}

TEST(ClientConfigTest, AProgramsDefaultsLieUnderTheFileTheEnvironmentAndOverrides) {
  const std::string llama = kConfigs + "llama-3.1-8b.json";
  const std::map<std::string, std::string> prefixed = {{"attention-mode", "prefixed"}};
  auto mode = [&](const std::string& path, const std::map<std::string, std::string>& overrides) {
    auto o = LoadClientOptions(path, nullptr, overrides, &ControllerFinder::Parse, prefixed);
    EXPECT_TRUE(o.ok()) << o.status().ToString();
    return o.ok() ? o->mode : AttentionMode::kIsolated;
  };
  EXPECT_EQ(LoadClientOptions("", nullptr, {{"model-config", llama}})->mode,
            AttentionMode::kIsolated);  // pikv's own default
  EXPECT_EQ(mode("", {{"model-config", llama}}), AttentionMode::kPrefixed);
  EXPECT_EQ(mode("", {{"model-config", llama}, {"attention-mode", "isolated"}}),
            AttentionMode::kIsolated);
  testing::TempDir dir;
  std::ofstream(dir.str() + "/client.yaml") << "attention-mode: isolated\nmodel-config: " + llama;
  EXPECT_EQ(mode(dir.str() + "/client.yaml", {}), AttentionMode::kIsolated);
  setenv("PIKV_ATTENTION_MODE", "isolated", 1);
  EXPECT_EQ(mode("", {{"model-config", llama}}), AttentionMode::kIsolated);
  unsetenv("PIKV_ATTENTION_MODE");
  auto bad = LoadClientOptions("", nullptr, {{"model-config", llama}}, &ControllerFinder::Parse,
                               {{"attention-mode", "sometimes"}});
  EXPECT_EQ(bad.status().message().rfind("attention-mode:", 0), 0u) << bad.status().ToString();
}

TEST(ClientConfigTest, TheModelConfigsTextReadsAsItsFile) {
  const std::string qwen = kConfigs + "qwen3-8b.json";
  std::stringstream text;
  text << std::ifstream(qwen).rdbuf();
  auto file = LoadClientOptions("", nullptr, {{"model-config", qwen}});
  auto inline_text = LoadClientOptions("", nullptr, {{"model-config-json", text.str()}});
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ASSERT_TRUE(inline_text.ok()) << inline_text.status().ToString();
  EXPECT_EQ(inline_text->num_layers, file->num_layers);
  EXPECT_EQ(inline_text->num_kv_heads, file->num_kv_heads);
  EXPECT_EQ(inline_text->head_dim, file->head_dim);
  EXPECT_EQ(inline_text->dtype, file->dtype);
  EXPECT_EQ(inline_text->rope.main().theta, file->rope.main().theta);
  auto both =
      LoadClientOptions("", nullptr, {{"model-config", qwen}, {"model-config-json", text.str()}});
  EXPECT_NE(both.status().message().find("name the model's config once"), std::string::npos)
      << both.status().ToString();
  auto bad = LoadClientOptions("", nullptr, {{"model-config-json", "{\"num_hidden_layers\": "}});
  EXPECT_EQ(bad.status().message(), "model-config-json: not a JSON object");
  testing::TempDir dir;
  std::ofstream(dir.str() + "/broken.json") << "[1]";
  auto bad_file = LoadClientOptions("", nullptr, {{"model-config", dir.str() + "/broken.json"}});
  EXPECT_EQ(bad_file.status().message(),
            "model-config " + dir.str() + "/broken.json: not a JSON object");
}

// An engine passes its own config as text (flags); a settings file or the
// environment naming a model-config file yields to it instead of stopping
// the engine at start.
TEST(ClientConfigTest, TheLaterLayerNamesTheModelConfig) {
  std::stringstream qwen;
  qwen << std::ifstream(kConfigs + "qwen3-8b.json").rdbuf();
  const std::string llama = kConfigs + "llama-3.1-8b.json";
  testing::TempDir dir;
  std::ofstream(dir.str() + "/client.yaml") << "model-config: " + llama + "\n";
  auto from_file =
      LoadClientOptions(dir.str() + "/client.yaml", nullptr, {{"model-config-json", qwen.str()}});
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  EXPECT_EQ(from_file->num_layers, 36u);  // Qwen3-8B's, not Llama-3.1-8B's 32
  setenv("PIKV_MODEL_CONFIG", llama.c_str(), 1);
  auto from_env = LoadClientOptions("", nullptr, {{"model-config-json", qwen.str()}});
  unsetenv("PIKV_MODEL_CONFIG");
  ASSERT_TRUE(from_env.ok()) << from_env.status().ToString();
  EXPECT_EQ(from_env->num_layers, 36u);
  // A path given as a flag over a text in the file: the path.
  std::ofstream(dir.str() + "/text.yaml") << "model-config-json: '{\"model_type\": 1}'\n";
  auto path_flag = LoadClientOptions(dir.str() + "/text.yaml", nullptr, {{"model-config", llama}});
  ASSERT_TRUE(path_flag.ok()) << path_flag.status().ToString();
  EXPECT_EQ(path_flag->num_layers, 32u);
}

TEST(ClientConfigTest, TheExampleLoadsUpToItsModelConfig) {
  auto o = LoadClientOptions(std::string(PIKV_SOURCE_DIR) + "/deploy/client.example.yaml");
  // The example points at a model config that is not on this machine.
  EXPECT_NE(o.status().message().find("model-config: cannot read /models/"), std::string::npos)
      << o.status().ToString();
}

TEST(ClientConfigTest, DistanceBucketsAreASettingOfPrefixedModeOnly) {
  const std::string llama = kConfigs + "llama-3.1-8b.json";
  auto load = [&](std::map<std::string, std::string> overrides) {
    overrides["model-config"] = llama;
    return LoadClientOptions("", nullptr, overrides, &ControllerFinder::Parse, {});
  };
  EXPECT_EQ(load({})->distance_buckets, DistanceBuckets{});
  auto pow2 = load({{"attention-mode", "prefixed"}, {"distance-buckets", "pow2"}});
  ASSERT_TRUE(pow2.ok()) << pow2.status().ToString();
  EXPECT_EQ(pow2->distance_buckets.BucketOf(100), 128);
  EXPECT_EQ(load({{"attention-mode", "prefixed"}, {"distance-buckets", "64"}})
                ->distance_buckets.BucketOf(100),
            128);
  auto isolated = load({{"distance-buckets", "pow2"}});
  ASSERT_FALSE(isolated.ok());
  EXPECT_NE(isolated.status().message().find("needs attention-mode prefixed"), std::string::npos);
  auto bad = load({{"attention-mode", "prefixed"}, {"distance-buckets", "far"}});
  EXPECT_EQ(bad.status().message().rfind("distance-buckets:", 0), 0u) << bad.status().ToString();
}

// A program's default scheme (the vLLM connector's pow2) is prefixed mode's:
// an operator who chose isolated gets no buckets, not a refusal.
TEST(ClientConfigTest, ADefaultBucketSchemeDoesNotFollowTheModeToIsolated) {
  const std::map<std::string, std::string> defaults = {{"attention-mode", "prefixed"},
                                                       {"distance-buckets", "pow2"}};
  auto load = [&](std::map<std::string, std::string> overrides) {
    overrides["model-config"] = kConfigs + "llama-3.1-8b.json";
    return LoadClientOptions("", nullptr, overrides, &ControllerFinder::Parse, defaults);
  };
  auto prefixed = load({});
  ASSERT_TRUE(prefixed.ok()) << prefixed.status().ToString();
  EXPECT_EQ(prefixed->distance_buckets.BucketOf(100), 128);
  auto isolated = load({{"attention-mode", "isolated"}});
  ASSERT_TRUE(isolated.ok()) << isolated.status().ToString();
  EXPECT_EQ(isolated->distance_buckets, DistanceBuckets{});
  EXPECT_FALSE(load({{"attention-mode", "isolated"}, {"distance-buckets", "pow2"}}).ok());
}

}  // namespace
}  // namespace pikv::client
