#include "pikv/common/config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

namespace pikv {
namespace {

using K = Config::Kind;
using S = Config::Source;

Config Sample() {
  Config c;
  c.Declare("cpu-capacity", K::kSize, "1GiB", "");
  c.Declare("heartbeat-interval", K::kDuration, "1s", "");
  c.Declare("workers", K::kInt, "2", "");
  c.Declare("disk", K::kBool, "true", "");
  c.Declare("endpoint", K::kList, "tcp://a,tcp://b", "");
  c.Declare("node-id", K::kString, "", "");
  return c;
}

TEST(ConfigTest, FlagsBeatEnvBeatFileBeatDefaults) {
  Config c = Sample();
  ASSERT_TRUE(c.LoadYamlText("cpu-capacity: 8GiB\nworkers: 3\nnode-id: from-file\n").ok());
  std::map<std::string, std::string> env = {{"PIKV_WORKERS", "5"}, {"PIKV_NODE_ID", "from-env"}};
  ASSERT_TRUE(c.LoadEnv([&](const char* name) -> const char* {
                 auto it = env.find(name);
                 return it == env.end() ? nullptr : it->second.c_str();
               }).ok());
  ASSERT_TRUE(c.Set("node-id", "from-flag", S::kFlag).ok());
  EXPECT_EQ(c.Size("cpu-capacity"), 8ull << 30);
  EXPECT_EQ(c.SourceOf("cpu-capacity"), S::kFile);
  EXPECT_EQ(c.Int("workers"), 5);
  EXPECT_EQ(c.SourceOf("workers"), S::kEnv);
  EXPECT_EQ(c.String("node-id"), "from-flag");
  EXPECT_EQ(c.SourceOf("node-id"), S::kFlag);
  EXPECT_EQ(c.Duration("heartbeat-interval").count(), 1000);
  EXPECT_EQ(c.SourceOf("heartbeat-interval"), S::kDefault);
  const std::string printed = c.Print();
  EXPECT_NE(printed.find("cpu-capacity: 8GiB    # file"), std::string::npos) << printed;
  EXPECT_NE(printed.find("workers: 5    # env"), std::string::npos);
  EXPECT_NE(printed.find("node-id: from-flag    # flag"), std::string::npos);
}

TEST(ConfigTest, ASecretIsReadLikeAStringButNeverPrinted) {
  Config c = Sample();
  c.Declare("redis-password", K::kSecret, "", "");
  EXPECT_NE(c.Print().find("redis-password: ''    # default"), std::string::npos);
  ASSERT_TRUE(c.LoadEnv([](const char* name) -> const char* {
                 return std::string(name) == "PIKV_REDIS_PASSWORD" ? "hunter2-xyz" : nullptr;
               }).ok());
  EXPECT_EQ(c.String("redis-password"), "hunter2-xyz");
  const std::string printed = c.Print();
  EXPECT_EQ(printed.find("hunter2-xyz"), std::string::npos) << printed;
  EXPECT_NE(printed.find("redis-password: (set, not shown)    # env"), std::string::npos)
      << printed;
}

TEST(ConfigTest, HumanUnitsAndLists) {
  Config c = Sample();
  ASSERT_TRUE(
      c.LoadYamlText(
           "cpu-capacity: 512MiB\nheartbeat-interval: 250ms\nendpoint: [tcp://x, ipc:///y]\n")
          .ok());
  EXPECT_EQ(c.Size("cpu-capacity"), 512ull << 20);
  EXPECT_EQ(c.Duration("heartbeat-interval").count(), 250);
  EXPECT_EQ(c.List("endpoint"), (std::vector<std::string>{"tcp://x", "ipc:///y"}));
  ASSERT_TRUE(c.Set("endpoint", "tcp://p,tcp://q", S::kEnv).ok());  // comma-separated outside YAML
  EXPECT_EQ(c.List("endpoint").size(), 2u);
  EXPECT_EQ(c.List("endpoint")[1], "tcp://q");
}

TEST(ConfigTest, UnknownKeysAndBadValuesNameTheKeyAndTheReason) {
  Config c = Sample();
  auto unknown = c.LoadYamlText("cpu-capacty: 1GiB\n", "node.yaml");
  EXPECT_EQ(unknown.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("node.yaml: unknown setting 'cpu-capacty'"), std::string::npos)
      << unknown.message();
  auto unit = c.Set("cpu-capacity", "12parsecs", S::kFlag);
  EXPECT_NE(unit.message().find("cpu-capacity: unknown size unit"), std::string::npos)
      << unit.message();
  EXPECT_NE(c.Set("heartbeat-interval", "10", S::kFlag).message().find("needs a unit"),
            std::string::npos);
  EXPECT_NE(c.Set("workers", "two", S::kFlag).message().find("workers: 'two' is not an integer"),
            std::string::npos);
  EXPECT_NE(c.Set("disk", "yes", S::kFlag).message().find("not true or false"), std::string::npos);
  EXPECT_FALSE(c.Set("nope", "1", S::kFlag).ok());
  EXPECT_FALSE(c.LoadYamlText("workers: [1, 2]\n").ok()) << "a list for a scalar";
  EXPECT_FALSE(c.LoadYamlText("workers: {a: 1}\n").ok()) << "a map for a scalar";
  EXPECT_FALSE(c.LoadYamlText("- just\n- a list\n").ok()) << "the file must be a map";
  EXPECT_FALSE(c.LoadYamlText("workers: [unclosed\n").ok()) << "broken YAML";
  // Found by fuzz_config_yaml: list items and keys that are maps or lists
  // used to throw out of yaml-cpp and abort the daemon.
  EXPECT_EQ(c.LoadYamlText("endpoint: [tcp://0.0.0.0:, x]\n").code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(c.LoadYamlText("endpoint: [[a], b]\n").code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(c.LoadYamlText("[a]: 1\n").code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(c.LoadYamlText("{a: 1}: 1\n").code(), ErrorCode::kInvalidArgument);
  auto env = c.LoadEnv([](const char* n) -> const char* {
    return std::string(n) == "PIKV_WORKERS" ? "x" : nullptr;
  });
  EXPECT_NE(env.message().find("PIKV_WORKERS"), std::string::npos) << env.message();
  // Nothing above changed a value.
  EXPECT_EQ(c.Size("cpu-capacity"), 1ull << 30);
  EXPECT_EQ(c.Int("workers"), 2);
}

}  // namespace
}  // namespace pikv
