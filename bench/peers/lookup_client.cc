// peer_lookup_client: the pikv side of bench/peers' lookup workload (issue
// 35, workload 3). `fill` registers a simulated node with a pikv-controller
// and reports --keys admits (bench/sim_node.h), returning once the
// controller has applied them all; `locate` asks the controller where
// --batch random keys of those are, call after call, for --seconds.
// bench/peers/mooncake_client.py --op fill-keys|exist is its twin for
// Mooncake's master; both print peer_data_client's JSON line
// (client_result.h), a call ok only when every key of it was found.
//
//   peer_lookup_client --endpoint E --op fill|locate --keys N [--batch 32]
//       [--seconds S] [--sync]
#include <CLI/CLI.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <zmq.hpp>

#include "client_result.h"
#include "pikv/proto/zmq_frames.h"
#include "pikv/rpc/admin_client.h"
#include "sim_node.h"

namespace pikv::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string endpoint, op;
  uint64_t keys = 1'000'000;
  size_t batch = 32;
  double seconds = 1;
  bool sync = false;
};

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

Result<int64_t> EventsApplied(rpc::AdminClient& admin) {
  auto j = admin.Json(MsgType::kAdminStats);
  if (!j.ok()) return j.status();
  return nlohmann::json::parse(*j, nullptr, false).value("events_applied", int64_t{-1});
}

int Fill(const Options& o) {
  rpc::AdminClient admin(o.endpoint, std::chrono::seconds(10));
  auto before = EventsApplied(admin);
  if (!before.ok()) {
    std::cerr << "peer_lookup_client: " << before.status().ToString() << "\n";
    return 2;
  }
  zmq::socket_t node(ClientContext(), zmq::socket_type::dealer);
  node.set(zmq::sockopt::linger, 0);
  node.set(zmq::sockopt::rcvtimeo, 10'000);
  node.connect(o.endpoint);
  if (!RegisterSimulatedNode(node, "peers-lookup", 1)) {
    std::cerr << "peer_lookup_client: the controller did not answer the registration\n";
    return 2;
  }
  const auto t0 = Clock::now();
  const size_t batch = 1024;
  for (uint64_t first = 0, seq = 1; first < o.keys; first += batch, ++seq) {
    const std::string message = EncodeHeader(
        AdmitBatch("peers-lookup", 1, seq, first, std::min<uint64_t>(batch, o.keys - first)));
    node.send(zmq::buffer(message), zmq::send_flags::none);
  }
  // Applied means locatable; the controller applies events in order.
  int64_t applied = 0;
  while (applied < static_cast<int64_t>(o.keys)) {
    if (auto now = EventsApplied(admin); now.ok()) applied = *now - *before;
    if (SecondsSince(t0) > 600) {
      std::cerr << "peer_lookup_client: " << applied << " of " << o.keys << " applied in 600 s\n";
      return 1;
    }
    if (applied < static_cast<int64_t>(o.keys))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ClientResult r;
  r.ok = o.keys;
  r.seconds = SecondsSince(t0);
  r.Print();
  return 0;
}

int Locate(const Options& o) {
  rpc::AdminClient admin(o.endpoint, std::chrono::seconds(10));
  std::mt19937_64 rng(std::random_device{}());
  std::vector<ChunkKey> keys(o.batch);
  auto call = [&] {
    for (auto& k : keys) k = SpreadKey(rng() % o.keys);
    auto found = admin.Locate(keys);
    if (!found.ok()) return false;
    for (const auto& replicas : *found)
      if (replicas.empty()) return false;
    return true;
  };
  (void)call();  // the connection made, untimed
  if (o.sync) WaitForGo();
  ClientResult r;
  const double cpu_start = CpuSeconds();
  const auto start = Clock::now();
  while (SecondsSince(start) < o.seconds || r.ok + r.failed == 0) {
    const auto t0 = Clock::now();
    if (!call()) {
      r.failed += o.batch;
      continue;
    }
    r.latencies_us.push_back(SecondsSince(t0) * 1e6);
    r.ok += o.batch;
  }
  r.seconds = SecondsSince(start);
  r.cpu_seconds = CpuSeconds() - cpu_start;
  r.Print();
  return r.failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace pikv::bench

int main(int argc, char** argv) {
  CLI::App app{"The pikv side of bench/peers' lookup workload"};
  pikv::bench::Options o;
  app.add_option("--endpoint", o.endpoint, "The pikv-controller")->required();
  app.add_option("--op", o.op)->required()->check(CLI::IsMember({"fill", "locate"}));
  app.add_option("--keys", o.keys, "Keys in the registry")->check(CLI::Range(1, 1 << 30));
  app.add_option("--batch", o.batch, "Keys per locate")->check(CLI::Range(1, 1024));
  app.add_option("--seconds", o.seconds, "Timed seconds (locate)");
  app.add_flag("--sync", o.sync, "Print ready, start on a line from stdin");
  CLI11_PARSE(app, argc, argv);
  try {
    return o.op == "fill" ? pikv::bench::Fill(o) : pikv::bench::Locate(o);
  } catch (const std::exception& e) {
    std::cerr << "peer_lookup_client: " << e.what() << "\n";
    return 2;
  }
}
