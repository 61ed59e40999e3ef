// `pikv demo` end to end, secure (the default) and with --insecure: the
// report says what it must, it exits 0, and no process it started outlives
// it.
#include <gtest/gtest.h>
#include <signal.h>

#include <regex>
#include <sstream>

#include "test_support.h"

namespace pikv {
namespace {

class DemoTest : public ::testing::TestWithParam<bool> {};

TEST_P(DemoTest, ReportsExactReuseWithHitsAndP2PAndLeavesNoProcessBehind) {
  const bool secure = GetParam();
  std::vector<std::string> args = {"demo", "--prompts", "12", "--docs", "10"};
  if (!secure) args.push_back("--insecure");
  testing::ChildProcess demo(testing::BinaryPath("pikv"), args);
  std::string out;
  while (auto line = demo.ReadLine(std::chrono::seconds(120))) out += *line + "\n";
  auto code = demo.Wait(std::chrono::seconds(30));
  ASSERT_TRUE(code.has_value()) << "the demo did not finish";
  EXPECT_EQ(*code, 0) << out;

  EXPECT_NE(out.find(secure ? "security on: CURVE" : "security OFF"), std::string::npos) << out;
  EXPECT_NE(out.find("exactness vs recompute"), std::string::npos) << out;
  EXPECT_NE(out.find("PASS"), std::string::npos) << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("P2P pulls \\(objects\\) +(\\d+)"))) << out;
  EXPECT_GT(std::stoi(m[1]), 0) << "peers served chunks";
  ASSERT_TRUE(std::regex_search(out, m, std::regex("chunks from the engine's own node +(\\d+)")));
  EXPECT_GT(std::stoi(m[1]), 0) << "local hits";
  EXPECT_NE(out.find("pikv admin nodes"), std::string::npos);
  EXPECT_NE(out.find("pikv admin stats"), std::string::npos);
  EXPECT_TRUE(std::regex_search(out, std::regex("p2p: \\d+ objects pulled"))) << out;

  // Every process the demo started is gone.
  ASSERT_TRUE(std::regex_search(out, m, std::regex("processes: ([0-9 ]+)\n"))) << out;
  std::istringstream pids(m[1]);
  int count = 0;
  for (pid_t pid; pids >> pid; ++count)
    EXPECT_NE(kill(pid, 0), 0) << "process " << pid << " survived the demo";
  EXPECT_GE(count, 4);  // controller and three nodes (and Redis when installed)
}

INSTANTIATE_TEST_SUITE_P(SecurityOnAndOff, DemoTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Secure" : "Insecure"; });

}  // namespace
}  // namespace pikv
