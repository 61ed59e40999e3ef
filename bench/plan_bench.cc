// plan_bench: what a plan costs its caller per admission (vLLM's scheduler
// waits on each), with the controller alive and after it is killed. Real
// processes: a controller and two nodes, no Redis. Engine A computes and
// stores --docs documents; engine B's client then plans [system, documents,
// question] --plans times, --interval-ms apart: every document a peer hit,
// so each plan asks B's node (exists) and the controller (locate). Then B
// plans on for --dead-seconds in each of: the controller hung (SIGSTOP: a
// locate never answers; a plan waits its locate-budget at most), running
// again (SIGCONT: when plans ask it again), and gone (SIGKILL: its port
// refuses at once). A plan's locate may be answered from what an earlier
// answer said (kept 1 s) without asking: "not skipped" counts both.
// Baseline, same run: B's node's own exists on the same keys (one RPC).
//
//   build/bin/plan_bench [--docs 4] [--plans 200] [--interval-ms 10] [--dead-seconds 20]
#include <CLI/CLI.hpp>
#include <csignal>
#include <iostream>
#include <random>
#include <thread>

#include "bench_util.h"
#include "pikv/engine/demo_engine.h"
#include "pikv/rpc/node_client.h"
#include "test_support.h"

namespace pikv::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// The plans of one phase: their times, and what they asked the controller.
struct Phase {
  std::string name;
  std::vector<double> ms;
  uint64_t asked = 0;  // not skipped: asked, or answered from an earlier answer kept
  uint64_t skipped = 0, answered = 0, over_5ms = 0, peer_hits = 0;
  double first_answer_s = -1;  // since the phase began; -1: none
};

Phase PlanFor(const std::string& name, client::Client& c, const client::ChunkedPrompt& prompt,
              Clock::duration how_long, int at_least, std::chrono::milliseconds interval) {
  Phase p{name};
  const client::ClientStats before = c.Stats();
  const auto start = Clock::now(), end = start + how_long;
  while (static_cast<int>(p.ms.size()) < at_least || Clock::now() < end) {
    const auto t0 = Clock::now();
    const client::Plan plan = c.MakePlan(prompt);
    p.ms.push_back(Ms(Clock::now() - t0));
    p.over_5ms += p.ms.back() > 5.0;
    if (plan.controller_answered && p.answered++ == 0)
      p.first_answer_s = std::chrono::duration<double>(t0 - start).count();
    for (const auto& chunk : plan.chunks) p.peer_hits += chunk.source == client::Source::kPeer;
    std::this_thread::sleep_for(interval);
  }
  const client::ClientStats after = c.Stats();
  p.skipped = after.controller_skipped - before.controller_skipped;
  p.asked = p.ms.size() - p.skipped;
  return p;
}

int Run(int docs, int plans, int interval_ms, int dead_seconds) {
  const engine::ModelConfig cfg = engine::DemoModelConfig();
  engine::ReferenceModel model(cfg);
  testing::TempDir dir_a, dir_b;
  auto ctl = testing::StartController(
      {"--endpoint", "tcp://127.0.0.1:*", "--http", "", "--log-level", "error"});
  auto node = [&](const testing::TempDir& d, const std::string& id) {
    return testing::StartNode({"--endpoint", "tcp://127.0.0.1:*", "--endpoint",
                               "ipc://" + d.str() + "/n.sock", "--data-dir", d.str(), "--node-id",
                               id, "--host", "host-" + id, "--controller", ctl.endpoint,
                               "--heartbeat-interval", "200ms", "--log-level", "error"});
  };
  auto na = node(dir_a, "a"), nb = node(dir_b, "b");
  auto options = [&](const testing::NodeProcess& n, const std::string& host) {
    return engine::ReferenceClientOptions(cfg, "plan-bench", n.ipc, ctl.endpoint, host);
  };
  engine::Engine a(model, options(na, "host-a")), b(model, options(nb, "host-b"));

  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> token(3, static_cast<int32_t>(cfg.vocab) - 1);
  std::vector<std::vector<int32_t>> segments(docs + 2);
  for (size_t s = 0; s < segments.size(); ++s) {
    segments[s].resize(s + 1 == segments.size() ? 8 : 64);
    for (auto& t : segments[s]) t = token(rng);
  }
  const client::ChunkedPrompt prompt = *client::FromSegments(segments);
  a.Run(prompt);  // computes and stores every document on A's node
  std::vector<ChunkKey> keys;
  for (const auto& c : b.client().MakePlan(prompt).chunks) keys.push_back(c.key);
  // A's reports reach the registry within a heartbeat or two.
  const auto ready_by = Clock::now() + 10s;
  while (b.client().MakePlan(prompt).chunks.back().source != client::Source::kPeer) {
    if (Clock::now() > ready_by) {
      std::cerr << "plan_bench: the documents were never located on A\n";
      return 1;
    }
    std::this_thread::sleep_for(50ms);
  }

  rpc::NodeClient exists_b(nb.ipc, 1s);  // what B's client dials
  std::vector<double> exists_ms;
  for (int i = 0; i < plans; ++i) {
    const auto t0 = Clock::now();
    if (!exists_b.Exists(keys).ok()) {
      std::cerr << "plan_bench: B's node did not answer exists\n";
      return 1;
    }
    exists_ms.push_back(Ms(Clock::now() - t0));
  }
  const std::chrono::milliseconds interval(interval_ms);
  const std::chrono::seconds dead(dead_seconds);
  std::vector<Phase> phases;
  phases.push_back(PlanFor("alive", b.client(), prompt, 0s, plans, interval));
  ctl.process->Signal(SIGSTOP);
  phases.push_back(PlanFor("hung (SIGSTOP)", b.client(), prompt, dead, plans, interval));
  ctl.process->Signal(SIGCONT);
  phases.push_back(PlanFor("running again (SIGCONT)", b.client(), prompt, dead, plans, interval));
  ctl.process->Signal(SIGKILL);
  ctl.process->Wait(5s);
  phases.push_back(PlanFor("gone (SIGKILL)", b.client(), prompt, dead, plans, interval));

  const double baseline = Median(exists_ms);
  Table t({"controller", "plans", "p50 ms", "p99 ms", "max ms", "p50 / exists", "> 5 ms",
           "not skipped", "answered", "first answer s", "peer hits"});
  t.Add({"(B's node exists alone)", std::to_string(exists_ms.size()), Fixed(baseline, 3),
         Fixed(Quantile(exists_ms, 0.99), 3), Fixed(Quantile(exists_ms, 1.0), 3), "1.00", "", "",
         "", "", ""});
  for (const Phase& p : phases) {
    t.Add({p.name, std::to_string(p.ms.size()), Fixed(Median(p.ms), 3),
           Fixed(Quantile(p.ms, 0.99), 3), Fixed(Quantile(p.ms, 1.0), 1),
           Fixed(Median(p.ms) / baseline, 2), std::to_string(p.over_5ms), std::to_string(p.asked),
           std::to_string(p.answered), p.answered ? Fixed(p.first_answer_s, 2) : "-",
           std::to_string(p.peer_hits)});
  }
  t.Print();
  std::cout << "documents " << docs << " of 64 tokens; controller-timeout "
            << b.client().options().controller_timeout.count() << " ms, locate-budget "
            << b.client().options().locate_budget.count() << " ms; plans every " << interval_ms
            << " ms\n";
  JsonLine j;
  j.Add("bench", std::string("plan"));
  j.Add("exists_p50_ms", baseline);
  for (const Phase& p : phases) {
    const std::string k = p.name.substr(0, p.name.find(' '));
    j.Add(k + "_plans", p.ms.size());
    j.Add(k + "_p50_ms", Median(p.ms));
    j.Add(k + "_p99_ms", Quantile(p.ms, 0.99));
    j.Add(k + "_max_ms", Quantile(p.ms, 1.0));
    j.Add(k + "_over_5ms", p.over_5ms);
    j.Add(k + "_asked_controller", p.asked);
    j.Add(k + "_answered", p.answered);
  }
  std::cout << j.str() << std::endl;
  return 0;
}

}  // namespace
}  // namespace pikv::bench

int main(int argc, char** argv) {
  CLI::App app("plan_bench: a plan's cost per admission, controller alive and dead");
  int docs = 4, plans = 200, interval_ms = 10, dead_seconds = 20;
  app.add_option("--docs", docs, "documents per prompt")->check(CLI::Range(1, 64));
  app.add_option("--plans", plans, "plans per phase (at least)")->check(CLI::Range(1, 100000));
  app.add_option("--interval-ms", interval_ms, "between plans")->check(CLI::Range(0, 10000));
  app.add_option("--dead-seconds", dead_seconds, "how long to plan with the controller dead")
      ->check(CLI::Range(0, 3600));
  CLI11_PARSE(app, argc, argv);
  try {
    return pikv::bench::Run(docs, plans, interval_ms, dead_seconds);
  } catch (const std::exception& e) {
    std::cerr << "plan_bench: " << e.what() << "\n";
    return 1;
  }
}
