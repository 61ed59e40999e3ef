// peer_lookup_client: the pikv side of bench/peers' lookup workload (issue
// 35, workload 3). `fill` registers a simulated node with a pikv-controller
// and reports --keys admits (bench/sim_node.h), returning once the
// controller has applied them all; `locate` asks the controller where
// --batch random keys of those are, call after call, for --seconds.
// bench/peers/mooncake_client.py --op fill-keys|exist is its twin for
// Mooncake's master; both print peer_data_client's JSON line
// (client_result.h), a call ok only when every key of it was found.
//
// `probe` (the failover workload) locates --batch random keys of the
// objects peer_data_client stores (MakeObject(i, --object-size), i <
// --keys), each call with a 500 ms deadline, for --seconds; it prints the
// calls (CLOCK_MONOTONIC start and end) whose outcome changed or that took
// over 100 ms (outcome 0: no answer, 1: answered but not every key found,
// 2: every key found), and how many of all the keys the controller located
// before and at the end:
//   {"events": [[start, end, outcome], ...], "found_before": n,
//    "found_after": n, "keys": N}
//
//   peer_lookup_client --endpoint E --op fill|locate|probe --keys N
//       [--batch 32] [--seconds S] [--object-size B] [--sync]
#include <CLI/CLI.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>
#include <zmq.hpp>

#include "client_result.h"
#include "pikv/coord/find_controllers.h"
#include "pikv/rpc/admin_client.h"
#include "pikv/transport/zmq_frames.h"
#include "sim_node.h"
#include "test_support.h"

namespace pikv::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string endpoint, op;
  uint64_t keys = 1'000'000, object_size = 4096;
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
  rpc::AdminClient admin(coord::FindControllers(o.endpoint), std::chrono::seconds(10));
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
  rpc::AdminClient admin(coord::FindControllers(o.endpoint), std::chrono::seconds(10));
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

// How many of `keys` the controller names a copy of; -1 when it does not
// answer.
int64_t Found(rpc::AdminClient& admin, std::span<const ChunkKey> keys) {
  auto located = admin.Locate({keys.begin(), keys.end()});
  if (!located.ok()) return -1;
  return std::count_if(located->begin(), located->end(), [](const auto& r) { return !r.empty(); });
}

int Probe(const Options& o) {
  std::vector<ChunkKey> all;
  for (uint64_t i = 0; i < o.keys; ++i) all.push_back(testing::MakeObject(i, o.object_size).key);
  rpc::AdminClient admin(coord::FindControllers(o.endpoint), std::chrono::milliseconds(500));
  std::mt19937_64 rng(std::random_device{}());
  std::vector<ChunkKey> call(o.batch);
  auto outcome = [&] {
    for (auto& k : call) k = all[rng() % all.size()];
    const int64_t found = Found(admin, call);
    return found < 0 ? 0 : found == static_cast<int64_t>(call.size()) ? 2 : 1;
  };
  // The scans before and after are not the probe: a patient deadline.
  rpc::AdminClient scanner(coord::FindControllers(o.endpoint), std::chrono::seconds(10));
  auto found_all = [&] {
    int64_t found = 0;
    for (size_t first = 0; first < all.size(); first += 1024) {
      const size_t n = std::min<size_t>(1024, all.size() - first);
      found += std::max<int64_t>(0, Found(scanner, std::span(all).subspan(first, n)));
    }
    return found;
  };
  // The node reports its admits asynchronously: wait (up to 60 s) until the
  // registry holds every key, so the kill meets a full registry.
  int64_t found_before = found_all();
  for (const auto start = Clock::now();
       found_before < static_cast<int64_t>(all.size()) && SecondsSince(start) < 60;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    found_before = found_all();
  }
  if (o.sync) WaitForGo();
  std::ostringstream events;
  int last = -1;
  auto seconds = [] {
    return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  };
  for (const auto start = Clock::now(); SecondsSince(start) < o.seconds;) {
    const double t0 = seconds();
    const int now = outcome();
    const double t1 = seconds();
    if (now != last || t1 - t0 > 0.1) {  // a slow call may have spanned the failover
      events << (last < 0 ? "" : ", ") << "[" << std::fixed << t0 << ", " << t1 << ", " << now
             << "]";
      last = now;
    }
  }
  std::cout << R"({"events": [)" << events.str() << R"(], "found_before": )" << found_before
            << R"(, "found_after": )" << found_all() << R"(, "keys": )" << all.size() << "}"
            << std::endl;
  return 0;
}

}  // namespace
}  // namespace pikv::bench

int main(int argc, char** argv) {
  CLI::App app{"The pikv side of bench/peers' lookup workload"};
  pikv::bench::Options o;
  app.add_option("--endpoint", o.endpoint, "The pikv-controller")->required();
  app.add_option("--op", o.op)->required()->check(CLI::IsMember({"fill", "locate", "probe"}));
  app.add_option("--keys", o.keys, "Keys in the registry")->check(CLI::Range(1, 1 << 30));
  app.add_option("--batch", o.batch, "Keys per locate")->check(CLI::Range(1, 1024));
  app.add_option("--seconds", o.seconds, "Timed seconds (locate)");
  app.add_option("--object-size", o.object_size, "probe: the size of the stored objects");
  app.add_flag("--sync", o.sync, "Print ready, start on a line from stdin");
  CLI11_PARSE(app, argc, argv);
  try {
    if (o.op == "probe") return pikv::bench::Probe(o);
    return o.op == "fill" ? pikv::bench::Fill(o) : pikv::bench::Locate(o);
  } catch (const std::exception& e) {
    std::cerr << "peer_lookup_client: " << e.what() << "\n";
    return 2;
  }
}
