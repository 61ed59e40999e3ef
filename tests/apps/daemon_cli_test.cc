// The three binaries' command lines: effective configuration, the shipped
// example configs, bad values, and --version.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <tuple>

#include "pikv/client/client_config.h"
#include "pikv/transport/curve.h"
#include "test_support.h"

namespace pikv {
namespace {

TEST(DaemonCliTest, TheDaemonsPrintTheirEffectiveConfiguration) {
  testing::TempDir dir;
  const std::string file = dir.str() + "/node.yaml";
  std::ofstream(file)
      << "cpu-capacity: 8GiB\nendpoint: [tcp://0.0.0.0:7400]\nheartbeat-interval: 500ms\n"
      << "redis-password: not-for-logs\n";
  setenv("PIKV_HEARTBEAT_INTERVAL", "2s", 1);
  testing::ChildProcess node(testing::BinaryPath("pikv-node"),
                             {"--config", file, "--workers", "4", "--print-config"});
  unsetenv("PIKV_HEARTBEAT_INTERVAL");
  std::string out;
  while (auto line = node.ReadLine(std::chrono::seconds(10))) out += *line + "\n";
  EXPECT_EQ(node.Wait(std::chrono::seconds(10)), 0);
  EXPECT_NE(out.find("cpu-capacity: 8GiB    # file"), std::string::npos) << out;
  EXPECT_NE(out.find("heartbeat-interval: 2s    # env"), std::string::npos) << out;
  EXPECT_NE(out.find("workers: 4    # flag"), std::string::npos) << out;
  EXPECT_NE(out.find("disk-capacity: 16GiB    # default"), std::string::npos) << out;
  EXPECT_NE(out.find("redis-password: (set, not shown)    # file"), std::string::npos) << out;
  EXPECT_EQ(out.find("not-for-logs"), std::string::npos) << out;
  testing::ChildProcess bad(testing::BinaryPath("pikv-controller"), {"--dead-after", "soon"});
  EXPECT_EQ(bad.Wait(std::chrono::seconds(10)), 2);
}

// A declared range holds before the daemon starts: a leader lease under 2 s
// (documented, once unchecked) or no worker thread is refused; the bounds pass.
TEST(DaemonCliTest, ValuesOutsideADeclaredRangeAreRefusedAtStart) {
  for (const auto& [binary, args, code] :
       {std::tuple{"pikv-controller", std::vector<std::string>{"--lease-ttl", "1s"}, 2},
        {"pikv-controller", {"--lease-ttl", "2s"}, 0},
        {"pikv-node", {"--workers", "0"}, 2},
        {"pikv-node", {"--pull-stream-frame", "4KiB"}, 2},
        {"pikv-node", {"--pull-stream-frame", "0"}, 0}}) {
    std::vector<std::string> argv = args;
    argv.push_back("--print-config");
    testing::ChildProcess p(testing::BinaryPath(binary), argv);
    while (p.ReadLine(std::chrono::seconds(10))) {
    }
    EXPECT_EQ(p.Wait(std::chrono::seconds(10)), code) << binary << " " << args[0] << " " << args[1];
  }
}

TEST(DaemonCliTest, TheExampleConfigsLoad) {
  for (const auto& [binary, file] : {std::pair{"pikv-node", "node.example.yaml"},
                                     std::pair{"pikv-controller", "controller.example.yaml"},
                                     std::pair{"pikv-node", "config/node.yaml"},
                                     std::pair{"pikv-controller", "config/controller.yaml"}}) {
    testing::ChildProcess p(
        testing::BinaryPath(binary),
        {"--config", std::string(PIKV_SOURCE_DIR) + "/deploy/" + file, "--print-config"});
    while (p.ReadLine(std::chrono::seconds(10))) {
    }
    EXPECT_EQ(p.Wait(std::chrono::seconds(10)), 0) << file;
  }
}

// Every key a program declares is in its example, set or commented out
// ("key:" or "# key:" at a line's start), so the examples are the list of
// settings an operator reads.
TEST(DaemonCliTest, TheExamplesNameEverySetting) {
  auto missing_from = [](const std::string& file, const std::vector<std::string>& keys) {
    std::ifstream in(std::string(PIKV_SOURCE_DIR) + "/deploy/" + file);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string missing;
    for (const std::string& key : keys) {
      if (!std::regex_search(text, std::regex("(^|\n)(# )?" + key + ":"))) missing += key + " ";
    }
    return missing;
  };
  for (const auto& [binary, file] : {std::pair{"pikv-node", "node.example.yaml"},
                                     std::pair{"pikv-controller", "controller.example.yaml"}}) {
    testing::ChildProcess p(testing::BinaryPath(binary), {"--print-config"});
    std::vector<std::string> keys;
    while (auto line = p.ReadLine(std::chrono::seconds(10)))
      keys.push_back(line->substr(0, line->find(':')));
    EXPECT_EQ(p.Wait(std::chrono::seconds(10)), 0) << binary;
    EXPECT_GE(keys.size(), 10u) << binary;
    EXPECT_EQ(missing_from(file, keys), "") << file;
  }
  Config client;
  client::DeclareClientSettings(client);
  EXPECT_EQ(missing_from("client.example.yaml", client.keys()), "");
}

TEST(DaemonCliTest, EveryBinaryAnswersVersion) {
  for (const std::string binary : {"pikv", "pikv-node", "pikv-controller"}) {
    testing::ChildProcess p(testing::BinaryPath(binary), {"--version"});
    auto line = p.ReadLine(std::chrono::seconds(10));
    EXPECT_EQ(p.Wait(std::chrono::seconds(10)), 0) << binary;
    ASSERT_TRUE(line.has_value()) << binary;
    EXPECT_TRUE(
        std::regex_match(*line, std::regex(binary + R"( \d+\.\d+\.\d+ \(git [0-9a-z-]+\))")))
        << *line;
  }
}

TEST(DaemonCliTest, KeygenWritesAKeyPairOnceAndPrintsItsPublicKey) {
  testing::TempDir dir;
  const std::string prefix = dir.str() + "/engine-1";
  auto run = [&] {
    testing::ChildProcess p(testing::BinaryPath("pikv"), {"keygen", prefix});
    std::string out;
    while (auto line = p.ReadLine(std::chrono::seconds(10))) out += *line + "\n";
    return std::pair{p.Wait(std::chrono::seconds(10)).value_or(-1), out};
  };
  auto [rc, out] = run();
  ASSERT_EQ(rc, 0) << out;
  auto keys = ReadCurveKeyPair(prefix);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_NE(out.find("public key: " + keys->public_key), std::string::npos) << out;
  EXPECT_EQ(out.find(keys->secret_key), std::string::npos);  // the secret stays in its file
  EXPECT_EQ(run().first, 1);                                 // never overwrites a key
  EXPECT_EQ(ReadCurveKeyPair(prefix)->secret_key, keys->secret_key);
}

TEST(DaemonCliTest, ModelInfoPrintsWhatPikvDerivesAndRefusesWithAReason) {
  testing::TempDir dir;
  const std::string llama = dir.str() + "/config.json";
  std::ofstream(llama) << R"({"hidden_size":4096,"num_attention_heads":32,
    "num_hidden_layers":32,"num_key_value_heads":8,"max_position_embeddings":131072,
    "model_type":"llama","rope_scaling":{"factor":8.0,"low_freq_factor":1.0,
    "high_freq_factor":4.0,"original_max_position_embeddings":8192,"rope_type":"llama3"},
    "rope_theta":500000.0,"torch_dtype":"bfloat16"})";
  auto run = [](std::vector<std::string> args) {
    testing::ChildProcess p(testing::BinaryPath("pikv"), args);
    std::string out;
    while (auto line = p.ReadLine(std::chrono::seconds(10))) out += *line + "\n";
    return std::pair{p.Wait(std::chrono::seconds(10)).value_or(-1), out};
  };
  auto [rc, out] = run({"model-info", llama, "--json"});
  ASSERT_EQ(rc, 0) << out;
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["kv_bytes_per_token"], 131072);
  EXPECT_EQ(j["rope_scaling"], "llama3");
  EXPECT_EQ(j["layers"], 32);
  EXPECT_NE(j["rope_signature"].get<std::string>().find("llama3"), std::string::npos);
  auto [table_rc, table] = run({"model-info", llama});
  EXPECT_EQ(table_rc, 0);
  EXPECT_NE(table.find("128.0 KiB"), std::string::npos) << table;

  const std::string dynamic = dir.str() + "/dynamic.json";
  std::ofstream(dynamic) << R"({"num_hidden_layers":2,"head_dim":64,"num_attention_heads":4,
    "torch_dtype":"bfloat16","rope_scaling":{"type":"dynamic","factor":2.0}})";
  auto [refused_rc, refused_out] = run({"model-info", dynamic});
  EXPECT_EQ(refused_rc, 1);
  EXPECT_TRUE(refused_out.empty()) << refused_out;
  EXPECT_EQ(run({"model-info", dir.str() + "/missing.json"}).first, 1);
}

}  // namespace
}  // namespace pikv
