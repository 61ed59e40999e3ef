// failover_bench: the controller surviving its host, measured on real
// processes. A 3-member etcd cluster, 3 controllers (one leads), 3 nodes
// with Redis, following the leader by etcd://; a locate every 100 ms and a
// data loop (GET, PUT, P2P pull, each verified byte for byte) run
// throughout. Faults, each repeated:
//   sigkill      the leader SIGKILLed (then restarted as a standby)
//   sigstop      the leader SIGSTOPped until replaced, then SIGCONTed
//   etcd-member  one etcd member SIGKILLed (then restarted)
//   all-down     every controller SIGKILLed, then one started
// Per fault: time without locate answers (from the fault), time until the
// registry equals every node's own `exists` (after locate answered again),
// wrong locations served (a location naming a node that does not hold the
// key: must be 0), data operations failed.
//
//   build/bin/failover_bench [--kills 20] [--stops 5] [--members 3] [--all-down 3]
#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstring>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "bench_util.h"
#include "cluster_queries.h"
#include "pikv/launch/etcd.h"
#include "pikv/rpc/admin_client.h"
#include "pikv/rpc/node_client.h"
#include "test_support.h"

using namespace std::chrono_literals;
using pikv::ChunkKey;
using pikv::SharedBuffer;
using pikv::bench::Fixed;
using pikv::bench::Median;
using pikv::rpc::AdminClient;
using pikv::rpc::NodeClient;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kControllers = 3, kNodes = 3;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

class Cluster {
 public:
  explicit Cluster(const std::string& ttl) : ttl_(ttl) {
    if (!etcd_.Start().ok()) throw std::runtime_error("etcd did not start");
    for (int i = 0; i < kControllers; ++i) {
      ports_[i] = pikv::testing::FreePort();
      StartController(i);
    }
    for (int i = 0; i < kNodes; ++i) {
      nodes_[i] = pikv::testing::StartNode(
          {"--endpoint", "tcp://127.0.0.1:*", "--data-dir", dirs_[i].str(), "--node-id",
           "n" + std::to_string(i), "--host", "host-" + std::to_string(i), "--controller", Spec(),
           "--redis", redis_.address(), "--cpu-capacity", "256MiB", "--log-level", "error"});
    }
  }
  void StartController(int i) {
    std::vector<std::string> args = {"--endpoint",  Endpoint(i), "--http",      "127.0.0.1:0",
                                     "--lease-ttl", ttl_,        "--log-level", "error"};
    for (const auto& a : etcd_.ControllerArgs()) args.push_back(a);
    controllers_[i] = pikv::testing::StartController(args);
  }
  void Signal(int i, int sig) { controllers_[i].process->Signal(sig); }
  void Kill(int i) {
    if (!controllers_[i].process) return;
    controllers_[i].process->Signal(SIGKILL);
    controllers_[i].process->Wait(5s);
    controllers_[i].process.reset();
  }
  // Controller i's role as it answers for itself ("" when silent).
  std::string Role(int i) const {
    return controllers_[i].process ? pikv::testing::ControllerRole(Endpoint(i)) : "";
  }
  int Leader() const {
    for (int i = 0; i < kControllers; ++i) {
      if (Role(i) == "leader") return i;
    }
    return -1;
  }
  std::string Endpoint(int i) const { return "tcp://127.0.0.1:" + std::to_string(ports_[i]); }
  std::string Spec() const { return etcd_.Spec(); }
  const std::string& node(int i) const { return nodes_[i].tcp; }
  pikv::launch::EtcdCluster& etcd() { return etcd_; }

 private:
  std::string ttl_;
  pikv::launch::EtcdCluster etcd_{3};
  pikv::testing::RedisServer redis_;
  int ports_[kControllers] = {};
  pikv::testing::ControllerProcess controllers_[kControllers];
  pikv::testing::TempDir dirs_[kNodes];
  pikv::testing::NodeProcess nodes_[kNodes];
};

// The objects the cluster should hold, by the node they were put on.
class Truth {
 public:
  void Add(int node, pikv::testing::TestObject o) {
    std::lock_guard lock(mu_);
    if (!by_key_.emplace(o.key, o.bytes).second) return;
    keys_[node].push_back(o.key);
  }
  std::vector<ChunkKey> All() const {
    std::lock_guard lock(mu_);
    std::vector<ChunkKey> out;
    for (const auto& [k, v] : by_key_) out.push_back(k);
    return out;
  }
  std::optional<std::pair<ChunkKey, SharedBuffer>> Pick(int node, uint64_t r) const {
    std::lock_guard lock(mu_);
    if (keys_[node].empty()) return std::nullopt;
    const ChunkKey k = keys_[node][r % keys_[node].size()];
    return std::make_pair(k, by_key_.at(k));
  }

 private:
  mutable std::mutex mu_;
  std::map<ChunkKey, SharedBuffer> by_key_;
  std::vector<ChunkKey> keys_[kNodes];
};

bool Same(const SharedBuffer& a, const SharedBuffer& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

bool RegistryHolds(Cluster& c, const std::vector<ChunkKey>& keys, uint64_t& wrong);

// Whether the registry (through the leader) equals what each node holds in
// CPU or disk; counts locations naming a node that does not hold the key.
bool RegistryWhole(Cluster& c, const Truth& truth, uint64_t& wrong) {
  const auto all = truth.All();
  bool whole = true;
  for (size_t from = 0; from < all.size(); from += 2048) {
    const std::vector<ChunkKey> keys(all.begin() + from,
                                     all.begin() + std::min(all.size(), from + 2048));
    if (!RegistryHolds(c, keys, wrong)) whole = false;
  }
  return whole;
}

bool RegistryHolds(Cluster& c, const std::vector<ChunkKey>& keys, uint64_t& wrong) {
  std::map<std::string, int> index;
  std::vector<std::set<ChunkKey>> held(kNodes);
  for (int i = 0; i < kNodes; ++i) {
    index[c.node(i)] = i;
    NodeClient n(c.node(i), 2s);
    auto mask = n.Exists(keys);
    if (!mask.ok()) return false;
    for (size_t k = 0; k < keys.size(); ++k) {
      if ((*mask)[k] & 3) held[i].insert(keys[k]);
    }
  }
  AdminClient admin(c.Spec(), 300ms);
  auto located = admin.Locate(keys);
  if (!located.ok()) return false;
  bool whole = true;
  for (size_t k = 0; k < keys.size(); ++k) {
    std::set<int> at;
    for (const auto& copy : (*located)[k]) {
      if (copy.location.tier == pikv::TierKind::kRemote) continue;
      auto it = index.find(copy.tcp);
      if (it == index.end()) {
        wrong++;
        continue;
      }
      if (!held[it->second].count(keys[k])) {
        // Not held when asked before the locate: wrong unless it arrived
        // since (a P2P pull of the load), so ask the node again, after.
        NodeClient n(c.node(it->second), 2s);
        auto mask = n.Exists({&keys[k], 1});
        if (mask.ok() && ((*mask)[0] & 3) == 0) wrong++;
        whole = false;
        continue;
      }
      at.insert(it->second);
    }
    for (int i = 0; i < kNodes; ++i) whole = whole && (at.count(i) == held[i].count(keys[k]));
  }
  return whole;
}

struct Counters {
  std::atomic<uint64_t> locates{0}, locate_failed{0}, wrong{0};
  std::atomic<uint64_t> gets{0}, get_failed{0}, puts{0}, put_failed{0}, pulls{0}, pull_failed{0};
  std::atomic<uint64_t> corrupt{0};
};

// Locate every 100 ms, each answer checked against the nodes it names.
void LocateLoop(Cluster& c, const Truth& truth, Counters& n, const std::atomic<bool>& stop) {
  AdminClient admin(c.Spec(), 200ms);
  std::map<std::string, std::unique_ptr<NodeClient>> holders;
  while (!stop) {
    auto keys = truth.All();
    if (keys.size() > 256) keys.resize(256);
    auto located = admin.Locate(keys);
    n.locates++;
    if (!located.ok()) {
      n.locate_failed++;
    } else {
      std::map<std::string, std::vector<ChunkKey>> named;  // by node endpoint
      for (size_t k = 0; k < keys.size(); ++k) {
        for (const auto& copy : (*located)[k]) {
          if (copy.location.tier != pikv::TierKind::kRemote) named[copy.tcp].push_back(keys[k]);
        }
      }
      for (const auto& [tcp, named_keys] : named) {
        auto& holder = holders[tcp];
        if (!holder) holder = std::make_unique<NodeClient>(tcp, 1s);
        auto mask = holder->Exists(named_keys);
        if (!mask.ok()) continue;
        for (uint8_t m : *mask) n.wrong += (m & 3) == 0;
      }
    }
    std::this_thread::sleep_for(100ms);
  }
}

// GET, PUT and P2P pull round the nodes, every byte verified.
void DataLoop(Cluster& c, Truth& truth, Counters& n, const std::atomic<bool>& stop) {
  std::vector<std::unique_ptr<NodeClient>> nodes;
  for (int i = 0; i < kNodes; ++i) nodes.push_back(std::make_unique<NodeClient>(c.node(i), 2s));
  for (uint64_t r = 1'000'000; !stop; ++r) {
    const int i = static_cast<int>(r % kNodes), j = static_cast<int>((r + 1) % kNodes);
    if (auto pick = truth.Pick(i, r)) {  // GET where it was put
      auto got = nodes[i]->Get({&pick->first, 1});
      n.gets++;
      if (!got.ok() || !(*got)[0].ok())
        n.get_failed++;
      else if (!Same(*(*got)[0], pick->second))
        n.corrupt++;
    }
    auto object = pikv::testing::MakeObject(r, 4 << 10);  // PUT a new one
    auto put = nodes[i]->Put({&object.key, 1}, {&object.bytes, 1});
    n.puts++;
    if (put.ok() && (*put)[0].ok())
      truth.Add(i, std::move(object));
    else
      n.put_failed++;
    if (auto pick = truth.Pick(i, r * 7)) {  // PULL to a peer: needs locate
      auto pulled = nodes[j]->Pull({&pick->first, 1}, "", 500ms);
      n.pulls++;
      if (!pulled.ok() || !(*pulled)[0].ok())
        n.pull_failed++;
      else if (!Same(*(*pulled)[0], pick->second))
        n.corrupt++;
    }
    std::this_thread::sleep_for(50ms);
  }
}

struct Sample {
  double silent = 0, whole_after = 0;
  uint64_t wrong = 0;
};

// After `fault`: how long until locate answers, then until the registry is whole.
Sample Measure(Cluster& c, const Truth& truth, const std::function<void()>& fault) {
  Sample s;
  AdminClient admin(c.Spec(), 100ms);
  const auto t0 = Clock::now();
  fault();
  const auto probe = truth.All().front();
  while (!admin.Locate({probe}).ok() && Clock::now() - t0 < 30s) std::this_thread::sleep_for(10ms);
  const auto answered = Clock::now();
  s.silent = Seconds(answered - t0);
  while (!RegistryWhole(c, truth, s.wrong) && Clock::now() - t0 < 60s)
    std::this_thread::sleep_for(20ms);
  s.whole_after = Seconds(Clock::now() - answered);
  return s;
}

void Settle(Cluster& c, const Truth& truth) {
  uint64_t ignored = 0;
  const auto t0 = Clock::now();
  while (Clock::now() - t0 < 30s) {
    int leaders = 0, standbys = 0;
    for (int i = 0; i < kControllers; ++i) {
      const std::string role = c.Role(i);
      leaders += role == "leader";
      standbys += role == "standby";
    }
    if (leaders == 1 && standbys == kControllers - 1 && RegistryWhole(c, truth, ignored)) return;
    std::this_thread::sleep_for(100ms);
  }
  throw std::runtime_error("the cluster did not settle with one leader and two standbys");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"failover_bench: leader failover under verifying load"};
  int kills = 20, stops = 5, members = 3, all_down = 3;
  std::string ttl = "3s";
  app.add_option("--kills", kills, "Leader SIGKILLs")->capture_default_str();
  app.add_option("--stops", stops, "Leader SIGSTOPs")->capture_default_str();
  app.add_option("--members", members, "etcd member kills")->capture_default_str();
  app.add_option("--all-down", all_down, "All controllers down, one back")->capture_default_str();
  app.add_option("--lease-ttl", ttl, "The controllers' lease TTL")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (!pikv::launch::EtcdCluster::Available()) {
    std::cerr << "failover_bench: etcd is not installed (apt-get install etcd-server)\n";
    return 2;
  }
  Cluster c(ttl);
  Truth truth;
  for (int i = 0; i < kNodes; ++i) {
    NodeClient n(c.node(i), 5s);
    for (int k = 0; k < 200; ++k) {
      auto o = pikv::testing::MakeObject(1000 * i + k, 4 << 10);
      auto r = n.Put({&o.key, 1}, {&o.bytes, 1});
      if (r.ok() && (*r)[0].ok()) truth.Add(i, std::move(o));
    }
  }
  Settle(c, truth);
  Counters counters;
  std::atomic<bool> stop{false};
  std::thread locator([&] { LocateLoop(c, truth, counters, stop); });
  std::thread data([&] { DataLoop(c, truth, counters, stop); });

  std::map<std::string, std::vector<Sample>> samples;
  std::map<std::string, uint64_t> failed_ops;
  auto run = [&](const std::string& name, int times, const std::function<void()>& fault,
                 const std::function<void()>& recover) {
    for (int t = 0; t < times; ++t) {
      const uint64_t failed_before =
          counters.get_failed + counters.put_failed + counters.pull_failed;
      samples[name].push_back(Measure(c, truth, fault));
      failed_ops[name] +=
          counters.get_failed + counters.put_failed + counters.pull_failed - failed_before;
      recover();
      Settle(c, truth);
      std::cerr << name << " " << t + 1 << "/" << times << ": no locate for "
                << Fixed(samples[name].back().silent, 2) << " s, whole "
                << Fixed(samples[name].back().whole_after, 2) << " s later\n";
    }
  };
  int victim = -1;
  run(
      "sigkill", kills,
      [&] {
        victim = c.Leader();
        c.Kill(victim);
      },
      [&] { c.StartController(victim); });
  run(
      "sigstop", stops,
      [&] {
        victim = c.Leader();
        c.Signal(victim, SIGSTOP);
      },
      [&] { c.Signal(victim, SIGCONT); });
  int member = 0;
  run(
      "etcd-member", members, [&] { c.etcd().Kill(member % 3); },
      [&] { (void)c.etcd().StartMember(member++ % 3); });
  run(
      "all-down", all_down,
      [&] {
        for (int i = 0; i < kControllers; ++i) c.Kill(i);
        c.StartController(0);
      },
      [&] {
        c.StartController(1);
        c.StartController(2);
      });
  stop = true;
  locator.join();
  data.join();

  pikv::bench::Table table({"fault", "runs", "no locate: median s", "max s",
                            "registry whole after: median s", "max s", "wrong locations",
                            "ops failed"});
  pikv::bench::JsonLine line;
  uint64_t wrong_total = counters.wrong;
  for (const auto& [name, list] : samples) {
    std::vector<double> silent, whole;
    uint64_t wrong = 0;
    for (const auto& s : list) {
      silent.push_back(s.silent);
      whole.push_back(s.whole_after);
      wrong += s.wrong;
    }
    wrong_total += wrong;
    table.Add({name, std::to_string(list.size()), Fixed(Median(silent), 2),
               Fixed(pikv::bench::Quantile(silent, 1), 2), Fixed(Median(whole), 2),
               Fixed(pikv::bench::Quantile(whole, 1), 2), std::to_string(wrong),
               std::to_string(failed_ops[name])});
    line.Add(name + "_no_locate_median_s", Median(silent));
    line.Add(name + "_no_locate_max_s", pikv::bench::Quantile(silent, 1));
    line.Add(name + "_whole_after_median_s", Median(whole));
    line.Add(name + "_whole_after_max_s", pikv::bench::Quantile(whole, 1));
    line.Add(name + "_ops_failed", failed_ops[name]);
  }
  table.Print();
  std::cout << "\nload: " << counters.locates << " locates (" << counters.locate_failed
            << " unanswered), " << counters.gets << " gets (" << counters.get_failed << " failed), "
            << counters.puts << " puts (" << counters.put_failed << " failed), " << counters.pulls
            << " P2P pulls (" << counters.pull_failed << " failed), " << counters.corrupt
            << " corrupt, " << wrong_total << " wrong locations\n";
  line.Add("lease_ttl_s", std::stod(ttl));
  line.Add("wrong_locations", wrong_total);
  line.Add("corrupt_bytes", counters.corrupt);
  line.Add("pulls_failed", counters.pull_failed);
  line.Add("gets_failed", counters.get_failed);
  line.Add("puts_failed", counters.put_failed);
  std::cout << line.str() << "\n";
  return wrong_total == 0 && counters.corrupt == 0 ? 0 : 1;
}
