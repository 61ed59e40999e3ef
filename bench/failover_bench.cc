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
// key: must be 0), data operations failed, P2P pulls among them (goal 0:
// during a failover a node pulls from where the controller last said).
// Security is on (CURVE, etcd over mutual TLS); an engine revoked before
// the first fault must stay refused after every one (goal: 0 lost).
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
#include "pikv/coord/find_controllers.h"
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
    keys_.AddEngine("revoked", "acme");  // revoked before the first fault
    keys_.AddEngine("honest", "acme");
    if (!etcd_.Start().ok()) throw std::runtime_error("etcd did not start");
    for (int i = 0; i < kControllers; ++i) {
      ports_[i] = pikv::testing::FreePort();
      StartController(i);
    }
    for (int i = 0; i < kNodes; ++i) {
      nodes_[i] = pikv::testing::StartNode(keys_.With(
          "node-" + NodeId(i),
          {"--endpoint", "tcp://127.0.0.1:*", "--data-dir", dirs_[i].str(), "--node-id", NodeId(i),
           "--host", "host-" + std::to_string(i), "--controller", Spec(), "--redis",
           redis_.address(), "--cpu-capacity", "256MiB", "--log-level", "error"}));
    }
  }
  static std::string NodeId(int i) { return "n" + std::to_string(i); }
  // Clients with the admin key (or engine `as`'s): the controller's leader, and node i.
  std::unique_ptr<AdminClient> Admin(std::chrono::milliseconds timeout,
                                     const std::string& as = "admin") const {
    return std::make_unique<AdminClient>(pikv::coord::FindControllers(Spec()), timeout,
                                         keys_.Dial(as));
  }
  std::unique_ptr<NodeClient> Node(int i, std::chrono::milliseconds timeout) const {
    return std::make_unique<NodeClient>(node(i), timeout, pikv::WireLimits{},
                                        keys_.Dial("admin", NodeId(i)));
  }
  int NodeIndex(const std::string& tcp) const {
    for (int i = 0; i < kNodes; ++i) {
      if (node(i) == tcp) return i;
    }
    return -1;
  }
  void StartController(int i) {
    std::vector<std::string> args = {"--endpoint",  Endpoint(i), "--http",      "127.0.0.1:0",
                                     "--lease-ttl", ttl_,        "--log-level", "error"};
    for (const auto& a : etcd_.ControllerArgs()) args.push_back(a);
    controllers_[i] = pikv::testing::StartController(keys_.With("controller", args));
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
    return controllers_[i].process ? pikv::testing::ControllerRole(Endpoint(i), keys_.Dial("admin"))
                                   : "";
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
  pikv::testing::TestKeys keys_{{NodeId(0), NodeId(1), NodeId(2)}};
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
    auto mask = c.Node(i, 2s)->Exists(keys);
    if (!mask.ok()) return false;
    for (size_t k = 0; k < keys.size(); ++k) {
      if ((*mask)[k] & 3) held[i].insert(keys[k]);
    }
  }
  auto located = c.Admin(300ms)->Locate(keys);
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
        auto mask = c.Node(it->second, 2s)->Exists({&keys[k], 1});
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
  auto admin = c.Admin(200ms);
  std::map<std::string, std::unique_ptr<NodeClient>> holders;
  while (!stop) {
    auto keys = truth.All();
    if (keys.size() > 256) keys.resize(256);
    auto located = admin->Locate(keys);
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
        const int i = c.NodeIndex(tcp);
        if (i < 0) {
          n.wrong += named_keys.size();  // a node that is not the cluster's
          continue;
        }
        if (!holder) holder = c.Node(i, 1s);
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
  for (int i = 0; i < kNodes; ++i) nodes.push_back(c.Node(i, 2s));
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
      (void)nodes[j]->Delete({&pick->first, 1});  // the next pull of it crosses the network again
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
  auto admin = c.Admin(100ms);
  const auto t0 = Clock::now();
  fault();
  const auto probe = truth.All().front();
  while (!admin->Locate({probe}).ok() && Clock::now() - t0 < 30s) std::this_thread::sleep_for(10ms);
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
    auto n = c.Node(i, 5s);
    for (int k = 0; k < 200; ++k) {
      auto o = pikv::testing::MakeObject(1000 * i + k, 4 << 10);
      auto r = n->Put({&o.key, 1}, {&o.bytes, 1});
      if (r.ok() && (*r)[0].ok()) truth.Add(i, std::move(o));
    }
  }
  Settle(c, truth);
  // Revoked once; every new leader must go on refusing it.
  auto revoked = c.Admin(2s)->Json(pikv::MsgType::kAdminRevoke, {}, {{"engine", "revoked"}});
  if (!revoked.ok()) {
    std::cerr << "failover_bench: revoke: " << revoked.status().ToString() << "\n";
    return 1;
  }
  const ChunkKey probe = truth.All().front();
  uint64_t revocation_checks = 0, revocations_lost = 0;
  // A check counts when the leader answers an honest engine of the same
  // tenant at the same moment (so a refusal is not just no leader).
  auto check_revoked = [&] {
    for (int attempt = 0; attempt < 20; ++attempt) {
      if (!c.Admin(1s, "honest")->Locate({probe}).ok()) {
        std::this_thread::sleep_for(100ms);
        continue;
      }
      revocation_checks++;
      if (c.Admin(1s, "revoked")->Locate({probe}).ok()) revocations_lost++;
      return;
    }
  };
  check_revoked();
  Counters counters;
  std::atomic<bool> stop{false};
  std::thread locator([&] { LocateLoop(c, truth, counters, stop); });
  std::thread data([&] { DataLoop(c, truth, counters, stop); });
  std::this_thread::sleep_for(2s);  // the load in its stride before the first fault

  std::map<std::string, std::vector<Sample>> samples;
  std::map<std::string, uint64_t> failed_ops, failed_pulls;
  auto run = [&](const std::string& name, int times, const std::function<void()>& fault,
                 const std::function<void()>& recover) {
    for (int t = 0; t < times; ++t) {
      const uint64_t failed_before =
          counters.get_failed + counters.put_failed + counters.pull_failed;
      const uint64_t pulls_failed_before = counters.pull_failed;
      samples[name].push_back(Measure(c, truth, fault));
      failed_ops[name] +=
          counters.get_failed + counters.put_failed + counters.pull_failed - failed_before;
      failed_pulls[name] += counters.pull_failed - pulls_failed_before;
      recover();
      Settle(c, truth);
      check_revoked();
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

  // What the nodes say of their pulls: objects fetched from a peer, and
  // pulls planned on remembered locations while no controller answered.
  int64_t pulled_objects = 0, pulls_from_memory = 0;
  for (int i = 0; i < kNodes; ++i) {
    if (auto stats = c.Node(i, 2s)->Stats(); stats.ok()) {
      pulled_objects += pikv::FieldInt(*stats, "p2p.pulled_objects");
      pulls_from_memory += pikv::FieldInt(*stats, "p2p.pulls_from_memory");
    }
  }
  pikv::bench::Table table({"fault", "runs", "no locate: median s", "max s",
                            "registry whole after: median s", "max s", "wrong locations",
                            "ops failed", "pulls failed"});
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
               std::to_string(failed_ops[name]), std::to_string(failed_pulls[name])});
    line.Add(name + "_no_locate_median_s", Median(silent));
    line.Add(name + "_no_locate_max_s", pikv::bench::Quantile(silent, 1));
    line.Add(name + "_whole_after_median_s", Median(whole));
    line.Add(name + "_whole_after_max_s", pikv::bench::Quantile(whole, 1));
    line.Add(name + "_ops_failed", failed_ops[name]);
    line.Add(name + "_pulls_failed", failed_pulls[name]);
  }
  table.Print();
  std::cout << "\nload: " << counters.locates << " locates (" << counters.locate_failed
            << " unanswered), " << counters.gets << " gets (" << counters.get_failed << " failed), "
            << counters.puts << " puts (" << counters.put_failed << " failed), " << counters.pulls
            << " P2P pulls (" << counters.pull_failed << " failed), " << counters.corrupt
            << " corrupt, " << wrong_total << " wrong locations\n"
            << "nodes: " << pulled_objects << " objects pulled from peers, " << pulls_from_memory
            << " pulls on remembered locations (no controller)\n"
            << "revocation: engine 'revoked' checked after every fault: " << revocations_lost
            << " of " << revocation_checks << " checks found it answered\n";
  line.Add("lease_ttl_s", std::stod(ttl));
  line.Add("wrong_locations", wrong_total);
  line.Add("corrupt_bytes", counters.corrupt);
  line.Add("pulls_failed", counters.pull_failed);
  line.Add("gets_failed", counters.get_failed);
  line.Add("puts_failed", counters.put_failed);
  line.Add("pulled_objects", pulled_objects);
  line.Add("pulls_from_memory", pulls_from_memory);
  line.Add("revocation_checks", revocation_checks);
  line.Add("revocations_lost", revocations_lost);
  std::cout << line.str() << "\n";
  return wrong_total == 0 && counters.corrupt == 0 && revocations_lost == 0 ? 0 : 1;
}
