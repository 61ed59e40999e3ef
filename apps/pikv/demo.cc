#include "demo.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_tables.h"
#include "pikv/common/stop_signal.h"
#include "pikv/coord/find_controllers.h"
#include "pikv/engine/demo_engine.h"
#include "pikv/rpc/admin_client.h"
#include "pikv/rpc/node_client.h"

namespace pikv::cli {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

void Progress(int done, int total) {
  const int width = 30, filled = total ? done * width / total : width;
  std::cerr << "\r  [" << std::string(filled, '#') << std::string(width - filled, ' ') << "] "
            << done << "/" << total << " prompts" << std::flush;
  if (done == total) std::cerr << "\n";
}

std::string SecurityLine(const launch::LocalCluster& cluster) {
  if (cluster.key_dir().empty())
    return "security OFF (--insecure): anyone who reaches these ports may read, write and clear";
  return "security on: CURVE on every tcp socket, keys and keyring in " + cluster.key_dir();
}

}  // namespace

int RunDemo(const DemoOptions& o) {
  const int num_nodes = o.cluster.nodes;
  std::cout << "pikv demo: a controller, " << num_nodes << " nodes"
            << (o.cluster.redis == "off" ? "" : " and Redis (if available)")
            << " on this machine\n";
  launch::LocalCluster cluster;
  if (Status s = cluster.Start(o.cluster); !s.ok()) {
    std::cerr << "pikv demo: " << s.message() << "\n";
    return 1;
  }
  std::cout << "controller " << cluster.controller_spec() << " (http " << cluster.controller().http
            << "), " << num_nodes << " nodes, Redis "
            << (cluster.redis_address().empty() ? "off" : cluster.redis_address()) << "\n"
            << "processes: " << cluster.Pids() << "\n"
            << SecurityLine(cluster) << "\n";

  const engine::ModelConfig cfg = engine::DemoModelConfig();
  engine::ReferenceModel model(cfg);
  std::vector<std::unique_ptr<engine::Engine>> engines;
  for (int i = 0; i < num_nodes; ++i) {
    client::ClientOptions options =
        engine::ReferenceClientOptions(cfg, "pikv-demo-reference", cluster.nodes()[i].ipc,
                                       cluster.controller_spec(), cluster.NodeHost(i));
    options.security = cluster.Security("engine");
    options.find_controllers = &coord::FindControllers;  // standbys elected on etcd
    engines.push_back(std::make_unique<engine::Engine>(model, std::move(options)));
  }
  std::cout
      << "workload: " << o.prompts << " RAG prompts over " << o.docs
      << " documents (Zipf popularity, 3-8 per prompt, random order), round-robin over the nodes\n";
  engine::RagTrace trace(cfg.vocab, o.docs, 2024);
  engine::Tally tally;
  double worst = 0;
  int checked = 0;
  for (int p = 0; p < o.prompts; ++p) {
    auto prompt = trace.Next();
    auto answer = engines[p % num_nodes]->Run(prompt);
    tally.Add(prompt, answer);
    if (o.check_every > 0 && p % o.check_every == 0) {
      auto scratch = engine::ScratchLogits(model, prompt);
      for (size_t i = 0; i < scratch.size(); ++i) {
        worst = std::max(worst, double(std::fabs(scratch[i] - answer.logits[i])));
      }
      checked++;
    }
    Progress(p + 1, o.prompts);
  }
  uint64_t pulls = 0;
  const auto admin_security = cluster.Security("admin");
  for (size_t i = 0; i < cluster.nodes().size(); ++i) {
    std::optional<CurveClientKeys> keys;
    if (admin_security) keys = *admin_security->ForNode(cluster.NodeId(i));
    rpc::NodeClient nc(cluster.nodes()[i].tcp, 2s, WireLimits{}, keys);
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
                          "chunks from the remote tier (Redis)", "chunks computed"};
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

  std::optional<CurveClientKeys> admin_keys;
  if (admin_security) admin_keys = *admin_security->ForController();
  rpc::AdminClient admin(coord::FindControllers(cluster.controller_spec()), 2s, admin_keys);
  try {
    if (auto nodes = admin.Json(MsgType::kAdminNodes); nodes.ok()) {
      std::cout << "\npikv admin nodes\n";
      PrintNodes(json::parse(*nodes));
    }
    if (auto stats = admin.Json(MsgType::kAdminStats); stats.ok()) {
      std::cout << "\npikv admin stats\n";
      PrintStats(json::parse(*stats));
    }
  } catch (const json::exception& e) {
    std::cerr << "pikv demo: the controller sent an unexpected document: " << e.what() << "\n";
  }
  std::cout << "\nstopping " << cluster.Pids() << std::endl;
  return exact && chunks > by_source[3] ? 0 : 1;
}

namespace {

// Every process the cluster started, with what an operator or a script
// needs to reach, watch or kill it.
json ClusterDocument(const launch::LocalCluster& c) {
  json processes = json::array();
  for (const auto& ctl : c.controllers()) {
    processes.push_back({{"role", "controller"},
                         {"pid", ctl.process->pid()},
                         {"endpoint", ctl.endpoint},
                         {"http", ctl.http}});
  }
  for (const auto& n : c.nodes()) {
    processes.push_back({{"role", "node"},
                         {"id", n.id},
                         {"pid", n.process->pid()},
                         {"tcp", n.tcp},
                         {"ipc", n.ipc},
                         {"http", n.http},
                         {"data_dir", n.data_dir}});
  }
  if (c.redis_pid() > 0)
    processes.push_back(
        {{"role", "redis"}, {"pid", c.redis_pid()}, {"address", c.redis_address()}});
  if (const launch::EtcdCluster* etcd = c.etcd()) {
    for (int i = 0; i < etcd->size(); ++i)
      processes.push_back({{"role", "etcd"}, {"pid", etcd->pid(i)}, {"client", etcd->member(i)}});
  }
  return {{"controller", c.controller_spec()},
          {"redis", c.redis_address()},
          {"key_dir", c.key_dir()},
          {"data_dir", c.data_dir()},
          {"processes", processes}};
}

void PrintCluster(const json& doc) {
  std::cout << "controller " << doc["controller"].get<std::string>() << "\n";
  const std::string redis = doc["redis"].get<std::string>();
  const bool redis_started_here = std::any_of(doc["processes"].begin(), doc["processes"].end(),
                                              [](const json& p) { return p["role"] == "redis"; });
  if (!redis.empty() && !redis_started_here) std::cout << "redis " << redis << " (not ours)\n";
  for (const json& p : doc["processes"]) {
    // "pid N role ...": a reader of the older text form ("node ..." lines)
    // finds no nodes rather than misreading a line. Programs read --json.
    std::cout << "pid " << p["pid"].get<pid_t>() << "  " << p["role"].get<std::string>();
    for (const char* field :
         {"id", "endpoint", "tcp", "ipc", "address", "client", "http", "data_dir"})
      if (p.contains(field)) std::cout << "  " << field << " " << p[field].get<std::string>();
    std::cout << "\n";
  }
}

}  // namespace

int RunCluster(const DemoOptions& o) {
  const sigset_t stop = BlockStopSignals();
  launch::LocalCluster cluster;
  if (Status s = cluster.Start(o.cluster); !s.ok()) {
    std::cerr << "pikv cluster: " << s.message() << "\n";
    return 1;
  }
  const json doc = ClusterDocument(cluster);
  if (o.json) {
    std::cout << doc.dump() << std::endl;  // one line, then the daemons' own log lines
  } else {
    PrintCluster(doc);
    std::cout << SecurityLine(cluster) << "\n";
    if (!cluster.key_dir().empty()) {
      std::cout << "export PIKV_CURVE_KEY=" << cluster.key_dir()
                << "/admin PIKV_CURVE_KEYRING=" << cluster.key_dir() << "/keyring\n";
    }
    std::cout << "try: pikv admin nodes --controller '" << cluster.controller_spec() << "'"
              << "\nCtrl-C stops it" << std::endl;
  }
  WaitForStopSignal(stop);
  return 0;
}

}  // namespace pikv::cli
