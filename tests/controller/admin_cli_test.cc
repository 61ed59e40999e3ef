// `pikv admin` against a real controller with a large node table: 64 nodes
// registered by FakeNodes, all holding one shared chunk. The admin replies
// once carried their JSON in a header string limited to 4 KiB, and `admin
// nodes` failed from about 8 nodes on (issue 10).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "fake_node.h"
#include "pikv/proto/chunk_key.h"
#include "test_support.h"

namespace pikv::controller {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr int kNodes = 64;

struct CliRun {
  int exit = -1;
  std::string out;
};

CliRun Pikv(std::vector<std::string> args) {
  testing::ChildProcess p(testing::BinaryPath("pikv"), args);
  CliRun r;
  while (auto line = p.ReadLine(10s)) r.out += *line + "\n";
  r.exit = p.Wait(10s).value_or(-1);
  return r;
}

class AdminCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    controller_ = testing::StartController(
        {"--endpoint", "tcp://127.0.0.1:*", "--http", "127.0.0.1:0", "--log-level", "error"});
    shared_ = ChunkKey::FromHex("0123456789abcdef0123456789abcdef").value();
    for (int i = 0; i < kNodes; ++i) {
      const std::string id = "big-node-" + std::to_string(i);
      nodes_.push_back(std::make_unique<testing::FakeNode>(controller_.endpoint, id));
      auto r = nodes_.back()->Register("tcp://127.0.0.1:" + std::to_string(20000 + i),
                                       "host-" + std::to_string(i));
      ASSERT_TRUE(r.ok() && r->header.status == ErrorCode::kOk) << id;
      nodes_.back()->Inventory({shared_});
    }
  }
  std::vector<std::string> Admin(std::vector<std::string> op) {
    op.insert(op.begin(), "admin");
    op.insert(op.end(), {"--controller", controller_.endpoint, "--timeout", "5s"});
    return op;
  }

  testing::ControllerProcess controller_;
  std::vector<std::unique_ptr<testing::FakeNode>> nodes_;
  ChunkKey shared_;
};

TEST_F(AdminCliTest, NodesListsEveryNodeOfALargeCluster) {
  CliRun r = Pikv(Admin({"nodes", "--json"}));
  ASSERT_EQ(r.exit, 0) << r.out;
  auto j = json::parse(r.out);
  ASSERT_EQ(j["nodes"].size(), size_t{kNodes});
  std::set<std::string> ids;
  for (const auto& n : j["nodes"]) ids.insert(n["id"].get<std::string>());
  EXPECT_EQ(ids.size(), size_t{kNodes});

  CliRun table = Pikv(Admin({"nodes"}));
  ASSERT_EQ(table.exit, 0) << table.out;
  size_t rows = 0;
  for (size_t at = 0; (at = table.out.find("big-node-", at)) != std::string::npos; ++at) ++rows;
  EXPECT_EQ(rows, size_t{kNodes}) << table.out;
}

TEST_F(AdminCliTest, StatsAndLocateAnswerForALargeCluster) {
  CliRun stats = Pikv(Admin({"stats", "--json"}));
  ASSERT_EQ(stats.exit, 0) << stats.out;
  auto j = json::parse(stats.out);
  EXPECT_EQ(j["per_node"].size(), size_t{kNodes});
  EXPECT_EQ(j["nodes_alive"].get<int>() + j["nodes_suspect"].get<int>(), kNodes);
  EXPECT_EQ(j["locations"].get<int>(), kNodes);  // the shared key, once per node
  CliRun stats_table = Pikv(Admin({"stats"}));
  EXPECT_EQ(stats_table.exit, 0) << stats_table.out;

  // Locate answers with the cheapest few copies of the 64.
  CliRun locate = Pikv(Admin({"locate", "--json", shared_.Hex()}));
  ASSERT_EQ(locate.exit, 0) << locate.out;
  auto l = json::parse(locate.out);
  ASSERT_EQ(l["keys"].size(), 1u);
  EXPECT_EQ(l["keys"][0]["locations"].size(), 8u);
  CliRun locate_table = Pikv(Admin({"locate", shared_.Hex()}));
  EXPECT_EQ(locate_table.exit, 0) << locate_table.out;
  EXPECT_NE(locate_table.out.find("big-node-"), std::string::npos) << locate_table.out;
}

}  // namespace
}  // namespace pikv::controller
