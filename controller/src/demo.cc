#include "demo.h"

#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_tables.h"
#include "engine_harness.h"
#include "pikv/controller/admin_client.h"
#include "pikv/node/node_client.h"
#include "pikv/proto/stop_signal.h"
#include "test_support.h"

namespace pikv::cli {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// The processes of a local cluster; stopped with SIGTERM on destruction.
struct LocalCluster {
  testing::TempDir dir;
  std::unique_ptr<testing::RedisServer> redis;
  std::string redis_address;
  testing::ControllerProcess controller;
  std::vector<testing::NodeProcess> nodes;
  std::vector<std::unique_ptr<testing::TempDir>> node_dirs;

  explicit LocalCluster(const DemoOptions& o) {
    if (o.redis == "auto" && testing::RedisServer::Available()) {
      redis = std::make_unique<testing::RedisServer>();
      redis_address = redis->address();
    } else if (o.redis != "auto" && o.redis != "off") {
      redis_address = o.redis;
    }
    controller = testing::StartController(
        {"--endpoint", "tcp://127.0.0.1:*", "--http", "127.0.0.1:0", "--log-level", "error"});
    for (int i = 0; i < o.nodes; ++i) {
      node_dirs.push_back(std::make_unique<testing::TempDir>());
      const std::string id = "node-" + std::to_string(i + 1);
      std::vector<std::string> args = {"--endpoint",
                                       "tcp://127.0.0.1:*",
                                       "--endpoint",
                                       "ipc://" + node_dirs.back()->str() + "/node.sock",
                                       "--data-dir",
                                       node_dirs.back()->str(),
                                       "--node-id",
                                       id,
                                       "--host",
                                       "host-" + id,
                                       "--controller",
                                       controller.endpoint,
                                       "--http",
                                       "127.0.0.1:0",
                                       "--heartbeat-interval",
                                       "200ms",
                                       "--cpu-capacity",
                                       "256MiB",
                                       "--disk-capacity",
                                       "1GiB",
                                       "--log-level",
                                       "error"};
      if (!redis_address.empty()) args.insert(args.end(), {"--redis", redis_address});
      nodes.push_back(testing::StartNode(args));
    }
  }
  ~LocalCluster() {
    for (auto& n : nodes) n.process->Signal(SIGTERM);
    for (auto& n : nodes) n.process->Wait(10s);
    controller.process->Signal(SIGTERM);
    controller.process->Wait(10s);
  }
  std::string Pids() const {
    std::string s = std::to_string(controller.process->pid());
    for (const auto& n : nodes) s += " " + std::to_string(n.process->pid());
    if (redis) s += " " + std::to_string(redis->pid());
    return s;
  }
  bool WaitAlive(size_t n) {
    controller::AdminClient admin(controller.endpoint, 1s);
    for (int i = 0; i < 200; ++i) {
      auto j = admin.Json(MsgType::kAdminHealth);
      if (j.ok() && nlohmann::json::parse(*j)["nodes_alive"] == n) return true;
      std::this_thread::sleep_for(25ms);
    }
    return false;
  }
};

void Progress(int done, int total) {
  const int width = 30, filled = total ? done * width / total : width;
  std::cerr << "\r  [" << std::string(filled, '#') << std::string(width - filled, ' ') << "] "
            << done << "/" << total << " prompts" << std::flush;
  if (done == total) std::cerr << "\n";
}

}  // namespace

int RunDemo(const DemoOptions& o) {
  std::cout << "pikv demo: a controller, " << o.nodes << " nodes"
            << (o.redis == "off" ? "" : " and Redis (if available)") << " on this machine\n";
  LocalCluster cluster(o);
  if (!cluster.WaitAlive(o.nodes)) {
    std::cerr << "pikv demo: the nodes did not come up\n";
    return 1;
  }
  std::cout << "controller " << cluster.controller.endpoint << " (http " << cluster.controller.http
            << "), " << o.nodes << " nodes, Redis "
            << (cluster.redis_address.empty() ? "off" : cluster.redis_address) << "\n"
            << "processes: " << cluster.Pids() << "\n";

  const device::ModelConfig cfg = testing::DemoModelConfig();
  device::ReferenceModel model(cfg);
  std::vector<std::unique_ptr<testing::Engine>> engines;
  for (int i = 0; i < o.nodes; ++i) {
    engines.push_back(std::make_unique<testing::Engine>(
        model, testing::ReferenceClientOptions(cfg, "pikv-demo-reference", cluster.nodes[i].ipc,
                                               cluster.controller.endpoint,
                                               "host-node-" + std::to_string(i + 1))));
  }
  std::cout
      << "workload: " << o.prompts << " RAG prompts over " << o.docs
      << " documents (Zipf popularity, 3-8 per prompt, random order), round-robin over the nodes\n";
  testing::RagTrace trace(cfg.vocab, o.docs, 2024);
  testing::Tally tally;
  double worst = 0;
  int checked = 0;
  for (int p = 0; p < o.prompts; ++p) {
    auto prompt = trace.Next();
    auto answer = engines[p % o.nodes]->Run(prompt);
    tally.Add(prompt, answer);
    if (o.check_every > 0 && p % o.check_every == 0) {
      auto scratch = testing::ScratchLogits(model, prompt);
      for (size_t i = 0; i < scratch.size(); ++i) {
        worst = std::max(worst, double(std::fabs(scratch[i] - answer.logits[i])));
      }
      checked++;
    }
    Progress(p + 1, o.prompts);
  }
  uint64_t pulls = 0;
  for (const auto& n : cluster.nodes) {
    node::NodeClient nc(n.tcp, 2s);
    auto s = nc.Stats();
    if (s.ok()) pulls += static_cast<uint64_t>(FieldInt(*s, "p2p.pulled_objects"));
  }
  const uint64_t* by_source = tally.by_source;
  const uint64_t chunks = tally.chunks();
  const double saved_ms =
      (tally.tokens_reused * tally.ComputeMicrosPerToken() - double(tally.hit_path.count())) /
      1000.0;
  const bool exact = worst <= 1e-4;

  std::cout << "\nreport\n";
  pikv::TextTable t({"", "value"});
  const char* names[4] = {"chunks from the engine's own node", "chunks pulled from a peer (P2P)",
                          "chunks from the shared Redis tier", "chunks computed"};
  for (int s = 0; s < 4; ++s) {
    t.Add({names[s], std::to_string(by_source[s]) + " (" +
                         Num(json(100.0 * by_source[s] / std::max<uint64_t>(1, chunks))) + " %)"});
  }
  t.Add({"P2P pulls (objects)", std::to_string(pulls)});
  t.Add({"prompt tokens computed / total",
         std::to_string(tally.tokens_computed) + " / " + std::to_string(tally.tokens_total)});
  t.Add({"time saved (model compute avoided - hit path)", Num(json(saved_ms)) + " ms"});
  t.Add({"exactness vs recompute", std::string(exact ? "PASS" : "FAIL") + " (" +
                                       std::to_string(checked) + " answers, max |logit error| " +
                                       Num(json(worst)) + ")"});
  t.Print(std::cout);

  controller::AdminClient admin(cluster.controller.endpoint, 2s);
  if (auto nodes = admin.Json(MsgType::kAdminNodes); nodes.ok()) {
    std::cout << "\npikv admin nodes\n";
    PrintNodes(json::parse(*nodes));
  }
  if (auto stats = admin.Json(MsgType::kAdminStats); stats.ok()) {
    std::cout << "\npikv admin stats\n";
    PrintStats(json::parse(*stats));
  }
  std::cout << "\nstopping " << cluster.Pids() << std::endl;
  return exact && chunks > by_source[3] ? 0 : 1;
}

int RunCluster(const DemoOptions& o) {
  const sigset_t stop = BlockStopSignals();
  LocalCluster cluster(o);
  if (!cluster.WaitAlive(o.nodes)) return 1;
  std::cout << "controller " << cluster.controller.endpoint << "  http " << cluster.controller.http
            << "\n";
  for (const auto& n : cluster.nodes)
    std::cout << "node " << n.tcp << "  " << n.ipc << "  http " << n.http << "\n";
  if (!cluster.redis_address.empty()) std::cout << "redis " << cluster.redis_address << "\n";
  std::cout << "try: pikv admin nodes --controller " << cluster.controller.endpoint
            << "\nCtrl-C stops it" << std::endl;
  WaitForStopSignal(stop);
  return 0;
}

}  // namespace pikv::cli
