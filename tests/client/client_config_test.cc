#include "pikv/client/client_config.h"

#include <gtest/gtest.h>

#include <fstream>

#include "test_support.h"

namespace pikv::client {
namespace {

TEST(ClientConfigTest, FileRopeConfigAndEnvironment) {
  testing::TempDir dir;
  std::ofstream(dir.str() + "/config.json")
      << R"({"hidden_size":4096,"num_attention_heads":32,"rope_theta":500000,
    "rope_scaling":{"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,
    "original_max_position_embeddings":8192}})";
  std::ofstream(dir.str() + "/client.yaml")
      << "model-id: llama\nnum-layers: 32\nnum-kv-heads: 8\nrope-config: " + dir.str() +
             "/config.json\nfetch-timeout: 3s\n";
  setenv("PIKV_FETCH_TIMEOUT", "750ms", 1);
  auto o = LoadClientOptions(dir.str() + "/client.yaml");
  unsetenv("PIKV_FETCH_TIMEOUT");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->model_id, "llama");
  EXPECT_EQ(o->num_layers, 32u);
  EXPECT_EQ(o->head_dim, 128u);  // from the model config
  EXPECT_EQ(o->rope.scaling, device::RopeScaling::kLlama3);
  EXPECT_EQ(o->fetch_timeout.count(), 750);  // the environment wins over the file
  EXPECT_EQ(o->dtype, DType::kBF16);
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
  EXPECT_TRUE(LoadClientOptions("").ok()) << "defaults alone are valid";
}

TEST(ClientConfigTest, TheExampleLoadsUpToItsModelConfig) {
  auto o = LoadClientOptions(std::string(PIKV_SOURCE_DIR) + "/deploy/client.example.yaml");
  // The example points at a model config that is not on this machine.
  EXPECT_NE(o.status().message().find("rope-config: cannot read /models/"), std::string::npos)
      << o.status().ToString();
}

}  // namespace
}  // namespace pikv::client
