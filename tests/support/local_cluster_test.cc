// LocalCluster and FindDaemon: what `pikv demo` and `pikv cluster` stand on.
#include "pikv/launch/local_cluster.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "pikv/rpc/admin_client.h"
#include "test_support.h"

namespace pikv::launch {
namespace {

const std::string kBinDir = std::filesystem::path(testing::BinaryPath("pikv-node")).parent_path();

TEST(FindDaemonTest, FindsWhatTheBinDirHoldsAndNamesWhatItLacks) {
  auto node = FindDaemon("pikv-node", kBinDir);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(*node, kBinDir + "/pikv-node");

  TempDir empty;
  auto missing = FindDaemon("pikv-node", empty.str());
  EXPECT_EQ(missing.code(), ErrorCode::kNotFound);
  EXPECT_NE(missing.status().message().find(empty.str()), std::string::npos);

  // A file that is not executable is not a daemon.
  std::ofstream(empty.str() + "/pikv-node") << "#!/bin/sh\n";
  EXPECT_EQ(FindDaemon("pikv-node", empty.str()).code(), ErrorCode::kNotFound);
}

TEST(FindDaemonTest, LooksNextToTheProgramThenOnPath) {
  // This test runs from the build's bin directory, beside pikv-node.
  const char* old = std::getenv("PATH");
  const std::string saved = old ? old : "";
  TempDir on_path;
  const std::string fake = on_path.str() + "/pikv-test-daemon";
  std::ofstream(fake) << "#!/bin/sh\n";
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);

  setenv("PATH", "/nonexistent", 1);
  auto beside = FindDaemon("pikv-node");
  auto lost = FindDaemon("pikv-test-daemon");
  setenv("PATH", ("/nonexistent:" + on_path.str()).c_str(), 1);
  auto found = FindDaemon("pikv-test-daemon");
  setenv("PATH", saved.c_str(), 1);

  ASSERT_TRUE(beside.ok()) << beside.status().ToString();
  EXPECT_EQ(*beside, kBinDir + "/pikv-node");
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(*found, fake);
  EXPECT_EQ(lost.code(), ErrorCode::kNotFound);
  EXPECT_NE(lost.status().message().find("--bin-dir"), std::string::npos);
}

TEST(LocalClusterTest, StartsEveryDaemonAndStopsThemAll) {
  std::vector<pid_t> pids;
  {
    LocalCluster cluster;
    ASSERT_TRUE(cluster.Start({.nodes = 2, .redis = "off", .bin_dir = kBinDir}).ok());
    ASSERT_EQ(cluster.nodes().size(), 2u);
    rpc::AdminClient admin(cluster.controller().endpoint, std::chrono::seconds(2),
                           *cluster.Security("admin")->ForController());
    auto health = admin.Health();
    ASSERT_TRUE(health.ok()) << health.status().ToString();
    EXPECT_EQ(health->nodes_alive, 2u);
    pids.push_back(cluster.controller().process->pid());
    for (const auto& n : cluster.nodes()) pids.push_back(n.process->pid());
  }
  for (pid_t pid : pids) EXPECT_NE(kill(pid, 0), 0) << pid << " outlived its LocalCluster";
}

TEST(LocalClusterTest, AMissingOrFailingDaemonIsAnErrorNotACrash) {
  TempDir empty;
  LocalCluster missing;
  Status s = missing.Start({.nodes = 1, .redis = "off", .bin_dir = empty.str()});
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_NE(s.message().find("pikv-controller"), std::string::npos) << s.ToString();

  // A "daemon" that exits at once.
  TempDir fake;
  for (const char* name : {"pikv-controller", "pikv-node"}) {
    const std::string path = fake.str() + "/" + name;
    std::ofstream(path) << "#!/bin/sh\nexit 3\n";
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  }
  LocalCluster failing;
  s = failing.Start({.nodes = 1, .redis = "off", .bin_dir = fake.str()});
  EXPECT_EQ(s.code(), ErrorCode::kUnavailable);
  EXPECT_NE(s.message().find("exited with status 3"), std::string::npos) << s.ToString();

  LocalCluster refused;
  EXPECT_EQ(refused.Start({.nodes = 0, .redis = "off", .bin_dir = kBinDir}).code(),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace pikv::launch
