#include "pikv/common/config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <stdexcept>

#include "pikv/common/units.h"

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

// A range is declared with the key and holds in every layer: the file, the
// environment and a flag are each refused with the key, the value and the
// range, and the value stays what it was.
TEST(ConfigTest, ARangeIsDeclaredOnceAndHeldInEveryLayer) {
  Config c;
  c.DeclareInt("workers", 2, "Worker threads", {.min = 1, .max = 64});
  c.DeclareSize("frame", 1 << 20, "Frame", {.min = 64 << 10, .max = 64 << 20, .or_zero = true});
  c.DeclareDuration("ttl", std::chrono::seconds(3), "Lease", {.min = 2000, .max = 60'000});
  EXPECT_EQ(c.Help("workers"), "Worker threads (1 to 64)");
  EXPECT_EQ(c.Help("frame"), "Frame (0 (off) or 64KiB to 64MiB)");
  EXPECT_EQ(c.Help("ttl"), "Lease (2s to 60s)");
  EXPECT_EQ(c.String("frame"), "1MiB") << "the typed default, as an operator writes it";
  EXPECT_EQ(c.String("ttl"), "3s");
  EXPECT_EQ(c.LoadYamlText("workers: 0\n", "n.yaml").message(),
            "n.yaml: workers: '0' is not 1 to 64");
  EXPECT_EQ(c.LoadEnv([](const char* n) -> const char* {
               return std::string(n) == "PIKV_WORKERS" ? "65" : nullptr;
             }).message(),
            "PIKV_WORKERS (workers: '65' is not 1 to 64)");
  EXPECT_EQ(c.Set("frame", "4KiB", S::kFlag).message(),
            "frame: '4KiB' is not 0 (off) or 64KiB to 64MiB");
  EXPECT_EQ(c.Set("frame", "1TiB", S::kFlag).message(),
            "frame: '1TiB' is not 0 (off) or 64KiB to 64MiB");
  EXPECT_FALSE(c.Set("ttl", "1s", S::kFlag).ok());
  EXPECT_FALSE(c.Set("ttl", "61s", S::kFlag).ok());
  EXPECT_EQ(c.Int("workers"), 2);
  EXPECT_EQ(c.Size("frame"), 1u << 20);
  ASSERT_TRUE(c.Set("frame", "0", S::kFlag).ok()) << "off";
  ASSERT_TRUE(c.Set("workers", "64", S::kFlag).ok()) << "the bounds are inside";
  ASSERT_TRUE(c.Set("ttl", "1m", S::kFlag).ok());
  EXPECT_EQ(c.Duration("ttl").count(), 60'000);
}

TEST(ConfigTest, ADefaultItsOwnRangeRefusesIsTheProgramsBug) {
  Config c;
  EXPECT_THROW(c.DeclareInt("workers", 0, "", {.min = 1}), std::logic_error);
  EXPECT_TRUE(c.keys().empty());
}

TEST(ConfigTest, TypedDefaultsAreWrittenExactly) {
  EXPECT_EQ(ByteSizeSetting(0), "0");
  EXPECT_EQ(ByteSizeSetting(1000), "1000");
  EXPECT_EQ(ByteSizeSetting(1536 << 10), "1536KiB");
  EXPECT_EQ(ByteSizeSetting(16ull << 30), "16GiB");
  EXPECT_EQ(ByteSizeSetting(3ull << 40), "3TiB");
  EXPECT_EQ(ByteSizeSetting(2048ull << 40), "2048TiB");
  EXPECT_EQ(DurationSetting(std::chrono::milliseconds(2500)), "2500ms");
  EXPECT_EQ(DurationSetting(std::chrono::milliseconds(0)), "0s");
  EXPECT_EQ(DurationSetting(std::chrono::seconds(30)), "30s");
  for (uint64_t bytes :
       {uint64_t{0}, uint64_t{4095}, uint64_t{1} << 20, (uint64_t{5} << 30) + 4096})
    EXPECT_EQ(*ParseByteSize(ByteSizeSetting(bytes)), bytes);
}

}  // namespace
}  // namespace pikv
