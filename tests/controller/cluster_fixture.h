// ClusterTest: a real pikv-controller and three real pikv-node processes on
// loopback, with helpers to put, locate, administer and wait. Shared by the
// multi-process controller tests. A fixture that sets secure_ before SetUp
// runs the cluster with security on (CURVE, keys made for it); the helpers
// then dial with the admin's keys.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "cluster_queries.h"
#include "pikv/rpc/admin_client.h"
#include "pikv/rpc/node_client.h"
#include "test_support.h"

namespace pikv::controller {

using namespace std::chrono_literals;
using rpc::AdminClient;
using rpc::NodeClient;
using Where = std::set<std::pair<std::string, TierKind>>;

constexpr auto kDeadAfter = 1500ms;

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (secure_) keys_.emplace(std::vector<std::string>{Id(0), Id(1), Id(2)});
    controller_port_ = testing::FreePort();
    StartControllerProcess();
    for (int i = 0; i < 3; ++i) StartNodeProcess(i);
    WaitFor([&] { return AliveNodes() == 3; }, 10s, "three nodes alive");
  }

  void StartControllerProcess() {
    controller_ = testing::StartController(WithKeys(
        "controller", {"--endpoint", Endpoint(), "--http", "127.0.0.1:0", "--suspect-after",
                       "600ms", "--dead-after", "1500ms", "--log-level", "warn"}));
  }
  std::string Endpoint() const { return "tcp://127.0.0.1:" + std::to_string(controller_port_); }
  void StartNodeProcess(int i) {
    nodes_[i] = testing::StartNode(WithKeys(
        "node-" + Id(i), {"--endpoint", "tcp://127.0.0.1:*", "--data-dir", dirs_[i].str(),
                          "--node-id", Id(i), "--host", "host-" + Id(i), "--controller", Endpoint(),
                          "--heartbeat-interval", "200ms", "--log-level", "warn"}));
  }
  // `args`, and when secure the flags that give `member` its keys.
  std::vector<std::string> WithKeys(const std::string& member, std::vector<std::string> args) {
    return testing::WithKeys(keys_, member, std::move(args));
  }
  // The admin's keys to dial the controller (node < 0) or node i; none
  // when not secure.
  std::optional<CurveClientKeys> AdminKeys(int node = -1) const {
    return testing::DialKeys(keys_, "admin", node < 0 ? "" : Id(node));
  }
  NodeClient Node(int i, std::chrono::milliseconds timeout = 5s) const {
    return NodeClient(nodes_[i].tcp, timeout, WireLimits{}, AdminKeys(i));
  }
  static std::string Id(int i) { return "node-" + std::string(1, static_cast<char>('a' + i)); }

  nlohmann::json Admin(MsgType type, std::vector<ChunkKey> keys = {},
                       const rpc::AdminArgs& args = {}) {
    AdminClient admin(Endpoint(), 2s, AdminKeys());
    auto r = admin.Json(type, keys, args);
    if (!r.ok()) return nlohmann::json();
    return nlohmann::json::parse(*r);
  }
  int AliveNodes() { return testing::AliveNodes(Endpoint(), AdminKeys()); }
  Where Locate(const ChunkKey& key) {
    AdminClient admin(Endpoint(), 2s, AdminKeys());
    auto r = admin.Locate({key});
    Where out;
    if (!r.ok()) return {{"<error>", TierKind::kCpu}};
    for (const auto& rep : (*r)[0]) out.insert({rep.node_id, rep.location.tier});
    return out;
  }
  void Put(int i, const testing::TestObject& o) {
    NodeClient c = Node(i, 10s);
    auto r = c.Put({&o.key, 1}, {&o.bytes, 1});
    ASSERT_TRUE(r.ok() && (*r)[0].ok());
  }
  // Polls `cond` until it holds; returns how long that took.
  template <typename Cond>
  std::chrono::milliseconds WaitFor(Cond cond, std::chrono::milliseconds limit,
                                    const std::string& what) {
    auto t0 = std::chrono::steady_clock::now();
    while (!cond()) {
      if (std::chrono::steady_clock::now() - t0 > limit) {
        ADD_FAILURE() << "timed out waiting for " << what;
        break;
      }
      std::this_thread::sleep_for(20ms);
    }
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 t0);
  }
  // Runs the real CLI; returns (exit code, stdout).
  std::pair<int, std::string> Cli(std::vector<std::string> args) {
    args.insert(args.begin(), "admin");
    args.insert(args.end(), {"--controller", Endpoint()});
    args = WithKeys("admin", std::move(args));
    testing::ChildProcess p(testing::BinaryPath("pikv"), args);
    std::string out;
    while (auto line = p.ReadLine(5s)) out += *line + "\n";
    return {p.Wait(5s).value_or(-1), out};
  }

  bool secure_ = false;
  std::optional<testing::TestKeys> keys_;  // when secure_
  int controller_port_ = 0;
  testing::ControllerProcess controller_;
  testing::TempDir dirs_[3];
  testing::NodeProcess nodes_[3];
};

}  // namespace pikv::controller
