// controller_bench: the registry in-process, and the controller over the wire.
//
//  1. In-process Registry with --keys keys (default 10 M) spread over 64
//     nodes: admit+evict and locate ops/s on one thread; resident bytes per
//     (key, location) entry, measured as RSS growth while filling.
//  2. Over the wire: --senders simulated nodes (default 8) register with a
//     real pikv-controller and send admit events in batches of 1024 as fast
//     as they can; events/s counts until the controller has applied them all.
//     Baseline: the same batches sent to a bare ZeroMQ sink (this binary with
//     --serve-sink), which only receives them.
//  3. locate of 32-key batches: p50/p99 latency beside a bare ZeroMQ round trip
//     of the same request to the sink.
//  4. Steps 2 and 3 again against a second controller with security on
//     (CURVE, keys made for this run; each sender with its node's key):
//     *_curve_vs_plain is what encryption and authentication cost.
//  5. score of a 64-chunk set (kScore: every node's tokens by reach, as
//     JSON) beside locate of the same 64 keys, call by call, against the
//     registry that step 2 filled (--senders x --batches x 1024 keys).
// Prints a table, then one JSON line.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <zmq.hpp>

#include "bench_util.h"
#include "pikv/controller/registry.h"
#include "pikv/rpc/admin_client.h"
#include "pikv/transport/zmq_frames.h"
#include "sim_node.h"
#include "test_support.h"

namespace pikv::bench {
namespace {

using Clock = std::chrono::steady_clock;
using controller::Registry;
using pikv::Location;

uint64_t ResidentBytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

// ---- Bare ZeroMQ sink (child process) -----------------------------------------
int ServeSink(const std::string& endpoint) {
  zmq::context_t ctx(1);
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.bind(endpoint);
  std::cout << "endpoint " << router.get(zmq::sockopt::last_endpoint) << "\nsink ready"
            << std::endl;
  std::vector<zmq::message_t> frames;
  uint64_t messages = 0;
  while (RecvFrames(router, frames)) {
    // Frame 1 starting with 'Q' asks for a reply (count or round trip).
    if (frames.size() >= 2 && frames[1].size() > 0 &&
        *static_cast<const char*>(frames[1].data()) == 'Q') {
      router.send(frames[0], zmq::send_flags::sndmore);
      std::string count = std::to_string(messages);
      router.send(zmq::buffer(count), zmq::send_flags::none);
    } else {
      messages++;
    }
  }
  return 0;
}

// ---- 1. In-process registry --------------------------------------------------------
struct RegistryFigures {
  double admit_evict_ops = 0, locate_ops = 0, bytes_per_entry_rss = 0, bytes_per_entry_tables = 0;
};

RegistryFigures BenchRegistry(uint64_t keys, uint64_t ops) {
  RegistryFigures f;
  const uint64_t rss0 = ResidentBytes();
  auto reg = std::make_unique<Registry>(64);
  auto loc_of = [](uint64_t i) {
    return Location{static_cast<uint16_t>(1 + i % 64), TierKind::kCpu};
  };
  for (uint64_t i = 0; i < keys; ++i) reg->Admit(SpreadKey(i), loc_of(i));
  const uint64_t rss1 = ResidentBytes();
  f.bytes_per_entry_rss = static_cast<double>(rss1 - rss0) / reg->locations();
  f.bytes_per_entry_tables = static_cast<double>(reg->MemoryBytes()) / reg->locations();

  std::mt19937_64 rng(1);
  std::vector<uint64_t> picks(1 << 20);
  for (auto& p : picks) p = rng() % keys;
  auto t0 = Clock::now();
  for (uint64_t n = 0; n < ops / 2; ++n) {
    uint64_t i = picks[n & (picks.size() - 1)];
    reg->Evict(SpreadKey(i), loc_of(i));
    reg->Admit(SpreadKey(i), loc_of(i));
  }
  f.admit_evict_ops = (ops / 2 * 2) / Seconds(Clock::now() - t0);

  std::vector<Location> out;
  uint64_t found = 0;
  t0 = Clock::now();
  for (uint64_t n = 0; n < ops; ++n) {
    out.clear();
    reg->Locate(SpreadKey(picks[n & (picks.size() - 1)]), out);
    found += out.size();
  }
  f.locate_ops = ops / Seconds(Clock::now() - t0);
  if (found != ops) std::cerr << "registry lost keys: " << found << " of " << ops << "\n";
  return f;
}

// ---- 2. Events over the wire -------------------------------------------------------
// The admin's keys to dial the controller, when `keys` (security on).
std::optional<CurveClientKeys> AdminKeys(const testing::TestKeys* security) {
  if (!security) return std::nullopt;
  return security->Dial("admin");
}

int64_t EventsApplied(const std::string& endpoint, const testing::TestKeys* security) {
  rpc::AdminClient admin(endpoint, std::chrono::seconds(5), AdminKeys(security));
  auto j = admin.Json(MsgType::kAdminStats);
  return j.ok() ? nlohmann::json::parse(*j)["events_applied"].get<int64_t>() : -1;
}

// Each sender sends `batches` batches of `batch` events (pre-encoded, so the
// timed loop is the transport and the receiver), as incarnation `round` + 1
// of its node (a new registration empties what an earlier round admitted).
// Returns events/s.
double SendEvents(const std::string& endpoint, int senders, int batches, size_t batch,
                  bool to_controller, const testing::TestKeys* security = nullptr, int round = 0) {
  const int64_t incarnation = round + 1;
  std::vector<std::vector<std::string>> encoded(senders);
  std::vector<std::string> ids;
  for (int s = 0; s < senders; ++s) {
    ids.push_back("sim-" + std::to_string(s));
    for (int b = 0; b < batches; ++b) {
      encoded[s].push_back(EncodeHeader(
          AdmitBatch(ids[s], incarnation, b + 1, (uint64_t(s) << 40) + b * batch, batch)));
    }
  }
  std::vector<std::unique_ptr<zmq::socket_t>> socks;
  for (int s = 0; s < senders; ++s) {
    socks.push_back(std::make_unique<zmq::socket_t>(ClientContext(), zmq::socket_type::dealer));
    socks.back()->set(zmq::sockopt::linger, 0);
    if (security) DialCurve(socks.back()->handle(), security->Dial("node-" + ids[s]));
    socks.back()->connect(endpoint);
    if (to_controller && !RegisterSimulatedNode(*socks.back(), ids[s], incarnation)) {
      std::cerr << "the controller did not answer " << ids[s] << "'s registration\n";
    }
  }
  const int64_t before = to_controller ? EventsApplied(endpoint, security) : 0;
  auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int s = 0; s < senders; ++s) {
    threads.emplace_back([&, s] {
      for (const auto& e : encoded[s]) socks[s]->send(zmq::buffer(e), zmq::send_flags::none);
    });
  }
  for (auto& t : threads) t.join();
  const int64_t total = int64_t{senders} * batches * static_cast<int64_t>(batch);
  if (to_controller) {
    while (EventsApplied(endpoint, security) - before < total)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  } else {
    // The sink counts messages; ask until all have arrived (a DEALER keeps order).
    zmq::socket_t q(ClientContext(), zmq::socket_type::dealer);
    q.connect(endpoint);
    while (true) {
      q.send(zmq::str_buffer("Q"), zmq::send_flags::none);
      zmq::message_t m;
      (void)q.recv(m);
      if (std::stoll(m.to_string()) >= int64_t{senders} * batches) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  return total / Seconds(Clock::now() - t0);
}

// ---- 3. Locate latency -------------------------------------------------------------
std::vector<double> LocateLatencies(const std::string& endpoint, uint64_t key_space, int calls,
                                    uint64_t& found, const testing::TestKeys* security = nullptr) {
  rpc::AdminClient admin(endpoint, std::chrono::seconds(5), AdminKeys(security));
  std::mt19937_64 rng(7);
  std::vector<double> ms;
  std::vector<ChunkKey> keys(32);
  for (int c = 0; c < calls; ++c) {
    for (auto& k : keys) k = SpreadKey((uint64_t(rng() % 8) << 40) + rng() % key_space);
    auto t0 = Clock::now();
    auto r = admin.Locate(keys, "bench");
    ms.push_back(Seconds(Clock::now() - t0) * 1e3);
    if (!r.ok()) {
      std::cerr << "locate failed: " << r.status().ToString() << "\n";
      continue;
    }
    for (const auto& replicas : *r) found += replicas.size();
  }
  return ms;
}

// ---- 5. Score beside locate ---------------------------------------------------------
struct ScoreFigures {
  std::vector<double> score_ms, locate_ms;
  uint64_t failed = 0;
};

// The same 64 keys scored then located, alternating, so noise hits both.
ScoreFigures ScoreBesideLocate(const std::string& endpoint, uint64_t key_space, int calls) {
  rpc::AdminClient admin(endpoint, std::chrono::seconds(5));
  std::mt19937_64 rng(11);
  ScoreFigures f;
  std::vector<ChunkKey> keys(64);
  rpc::AdminArgs args;
  args.tokens.assign(keys.size(), 256);
  for (int c = 0; c < calls; ++c) {
    for (auto& k : keys) k = SpreadKey((uint64_t(rng() % 8) << 40) + rng() % key_space);
    auto t0 = Clock::now();
    const bool scored = admin.Json(MsgType::kScore, keys, args).ok();
    auto t1 = Clock::now();
    const bool located = admin.Locate(keys, "bench").ok();
    auto t2 = Clock::now();
    if (!scored || !located) {  // a failed call is no latency
      f.failed++;
      continue;
    }
    f.score_ms.push_back(Seconds(t1 - t0) * 1e3);
    f.locate_ms.push_back(Seconds(t2 - t1) * 1e3);
  }
  return f;
}

std::vector<double> ZmqRoundTrips(const std::string& endpoint, int calls) {
  zmq::socket_t s(ClientContext(), zmq::socket_type::dealer);
  s.connect(endpoint);
  Header h;
  h.type = MsgType::kLocate;
  h.keys.assign(32, SpreadKey(1));
  std::string req = "Q" + EncodeHeader(h);  // same request size as a locate
  std::vector<double> ms;
  for (int c = 0; c < calls; ++c) {
    auto t0 = Clock::now();
    s.send(zmq::buffer(req), zmq::send_flags::none);
    zmq::message_t m;
    (void)s.recv(m);
    ms.push_back(Seconds(Clock::now() - t0) * 1e3);
  }
  return ms;
}

int Run(uint64_t keys, uint64_t ops, int senders, int batches) {
  RegistryFigures reg = BenchRegistry(keys, ops);

  testing::TempDir dir;
  // The simulated senders do not heartbeat: keep them alive for the run.
  auto ctl =
      testing::StartController({"--endpoint", "tcp://127.0.0.1:*", "--http", "", "--suspect-after",
                                "10m", "--dead-after", "20m", "--log-level", "warn"});
  testing::ChildProcess sink("/proc/self/exe", {"--serve-sink", "tcp://127.0.0.1:*"});
  std::string sink_ep;
  while (auto line = sink.ReadLine(std::chrono::seconds(10))) {
    if (line->rfind("endpoint ", 0) == 0) sink_ep = line->substr(9);
    if (*line == "sink ready") break;
  }
  std::vector<std::string> sim_ids;
  for (int s = 0; s < senders; ++s) sim_ids.push_back("sim-" + std::to_string(s));
  const testing::TestKeys curve_keys(sim_ids);
  auto secure_ctl = testing::StartController(curve_keys.With(
      "controller", {"--endpoint", "tcp://127.0.0.1:*", "--http", "", "--suspect-after", "10m",
                     "--dead-after", "20m", "--log-level", "warn"}));

  // Security off and on interleaved, so machine noise hits both alike.
  const size_t batch = 1024;
  std::vector<double> plain_rounds, secure_rounds;
  for (int round = 0; round < 3; ++round) {
    plain_rounds.push_back(SendEvents(ctl.endpoint, senders, batches, batch, true, nullptr, round));
    secure_rounds.push_back(
        SendEvents(secure_ctl.endpoint, senders, batches, batch, true, &curve_keys, round));
  }
  const double wire_events = Median(plain_rounds), secure_events = Median(secure_rounds);
  double sink_events = SendEvents(sink_ep, senders, batches, batch, false);
  uint64_t found = 0, secure_found = 0;
  const int calls = 20000;
  std::vector<double> locate_ms, secure_locate_ms;
  for (int part = 0; part < 4; ++part) {
    const uint64_t key_space = static_cast<uint64_t>(batches) * batch;
    auto plain = LocateLatencies(ctl.endpoint, key_space, calls / 4, found);
    auto secure =
        LocateLatencies(secure_ctl.endpoint, key_space, calls / 4, secure_found, &curve_keys);
    locate_ms.insert(locate_ms.end(), plain.begin(), plain.end());
    secure_locate_ms.insert(secure_locate_ms.end(), secure.begin(), secure.end());
  }
  auto rtt_ms = ZmqRoundTrips(sink_ep, 20000);
  const uint64_t registry_keys = EventsApplied(ctl.endpoint, nullptr) > 0
                                     ? static_cast<uint64_t>(senders) * batches * batch
                                     : 0;
  const ScoreFigures score =
      ScoreBesideLocate(ctl.endpoint, static_cast<uint64_t>(batches) * batch, 5000);

  Table table({"figure", "value", "baseline", "ratio"});
  table.Add({"registry admit+evict ops/s (1 thread)", Fixed(reg.admit_evict_ops / 1e6, 2) + " M",
             "", ""});
  table.Add({"registry locate ops/s (1 thread)", Fixed(reg.locate_ops / 1e6, 2) + " M", "", ""});
  table.Add({"resident bytes per (key, location)", Fixed(reg.bytes_per_entry_rss, 1),
             "tables: " + Fixed(reg.bytes_per_entry_tables, 1), ""});
  table.Add({"events/s over the wire (" + std::to_string(senders) + " senders)",
             Fixed(wire_events / 1e3, 0) + " k", "zmq sink " + Fixed(sink_events / 1e3, 0) + " k",
             Fixed(wire_events / sink_events, 2)});
  table.Add({"locate: keys found", Fixed(100.0 * found / (32.0 * calls), 1) + " %", "", ""});
  table.Add({"locate 32 keys p50 (ms)", Fixed(Percentile(locate_ms, 0.5), 3),
             "zmq rtt " + Fixed(Percentile(rtt_ms, 0.5), 3),
             Fixed(Percentile(locate_ms, 0.5) / Percentile(rtt_ms, 0.5), 2)});
  table.Add({"locate 32 keys p99 (ms)", Fixed(Percentile(locate_ms, 0.99), 3),
             "zmq rtt " + Fixed(Percentile(rtt_ms, 0.99), 3),
             Fixed(Percentile(locate_ms, 0.99) / Percentile(rtt_ms, 0.99), 2)});
  table.Add({"events/s, security on", Fixed(secure_events / 1e3, 0) + " k",
             "off " + Fixed(wire_events / 1e3, 0) + " k", Fixed(secure_events / wire_events, 2)});
  for (const auto& [name, q] : {std::pair{"p50", 0.5}, std::pair{"p99", 0.99}}) {
    const double on = Percentile(secure_locate_ms, q), off = Percentile(locate_ms, q);
    table.Add({std::string("locate 32 keys ") + name + " (ms), security on", Fixed(on, 3),
               "off " + Fixed(off, 3), Fixed(on / off, 2)});
  }
  table.Add({"locate: keys found, security on",
             Fixed(100.0 * secure_found / (32.0 * calls), 1) + " %", "", ""});
  table.Add({"registry keys for score/locate 64", std::to_string(registry_keys),
             "failed calls " + std::to_string(score.failed), ""});
  for (const auto& [name, q] : {std::pair{"p50", 0.5}, std::pair{"p99", 0.99}}) {
    const double s = Percentile(score.score_ms, q), l = Percentile(score.locate_ms, q);
    table.Add({std::string("score 64 keys ") + name + " (ms)", Fixed(s, 3),
               "locate 64 " + Fixed(l, 3), Fixed(s / l, 2)});
  }
  table.Print();

  JsonLine json;
  json.Add("bench", std::string("controller"));
  json.Add("registry_keys", static_cast<double>(keys));
  json.Add("registry_nodes", 64);
  json.Add("registry_admit_evict_ops_per_s", reg.admit_evict_ops);
  json.Add("registry_locate_ops_per_s", reg.locate_ops);
  json.Add("bytes_per_entry", reg.bytes_per_entry_rss);
  json.Add("bytes_per_entry_tables", reg.bytes_per_entry_tables);
  json.Add("wire_events_per_s", wire_events);
  json.Add("zmq_sink_events_per_s", sink_events);
  json.Add("wire_events_vs_zmq", wire_events / sink_events);
  json.Add("locate32_hit_fraction", static_cast<double>(found) / (32.0 * calls));
  json.Add("locate32_p50_ms", Percentile(locate_ms, 0.5));
  json.Add("locate32_p99_ms", Percentile(locate_ms, 0.99));
  json.Add("zmq_rtt_p50_ms", Percentile(rtt_ms, 0.5));
  json.Add("zmq_rtt_p99_ms", Percentile(rtt_ms, 0.99));
  json.Add("curve_wire_events_per_s", secure_events);
  json.Add("curve_events_vs_plain", secure_events / wire_events);
  json.Add("curve_locate32_p50_ms", Percentile(secure_locate_ms, 0.5));
  json.Add("curve_locate32_p99_ms", Percentile(secure_locate_ms, 0.99));
  json.Add("curve_locate32_p50_vs_plain",
           Percentile(secure_locate_ms, 0.5) / Percentile(locate_ms, 0.5));
  json.Add("curve_locate32_hit_fraction", static_cast<double>(secure_found) / (32.0 * calls));
  json.Add("score_registry_keys", static_cast<double>(registry_keys));
  json.Add("score64_p50_ms", Percentile(score.score_ms, 0.5));
  json.Add("score64_p99_ms", Percentile(score.score_ms, 0.99));
  json.Add("locate64_p50_ms", Percentile(score.locate_ms, 0.5));
  json.Add("locate64_p99_ms", Percentile(score.locate_ms, 0.99));
  json.Add("score64_p99_vs_locate64",
           Percentile(score.score_ms, 0.99) / Percentile(score.locate_ms, 0.99));
  json.Add("score_failed_calls", static_cast<double>(score.failed));
  std::cout << json.str() << std::endl;
  return 0;
}

}  // namespace
}  // namespace pikv::bench

int main(int argc, char** argv) {
  CLI::App app{"pikv controller: registry in-process and over the wire"};
  uint64_t keys = 10'000'000, ops = 8'000'000;
  int senders = 8, batches = 256;
  std::string sink;
  app.add_option("--keys", keys, "Keys in the in-process registry")->capture_default_str();
  app.add_option("--ops", ops, "Timed registry operations")->capture_default_str();
  app.add_option("--senders", senders, "Simulated nodes sending events")->capture_default_str();
  app.add_option("--batches", batches, "Event batches (1024 events) per sender")
      ->capture_default_str();
  app.add_option("--serve-sink", sink, "(internal) run the bare ZeroMQ sink");
  CLI11_PARSE(app, argc, argv);
  if (!sink.empty()) return pikv::bench::ServeSink(sink);
  return pikv::bench::Run(keys, ops, senders, batches);
}
