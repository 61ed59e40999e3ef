// The three binaries' command lines: effective configuration, the shipped
// example configs, bad values, and --version.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "test_support.h"

namespace pikv {
namespace {

TEST(DaemonCliTest, TheDaemonsPrintTheirEffectiveConfiguration) {
  testing::TempDir dir;
  const std::string file = dir.str() + "/node.yaml";
  std::ofstream(file)
      << "cpu-capacity: 8GiB\nendpoint: [tcp://0.0.0.0:7400]\nheartbeat-interval: 500ms\n";
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
  testing::ChildProcess bad(testing::BinaryPath("pikv-controller"), {"--dead-after", "soon"});
  EXPECT_EQ(bad.Wait(std::chrono::seconds(10)), 2);
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

}  // namespace
}  // namespace pikv
