// fault_soak: a controller, three nodes and Redis under a verifying load and
// random faults, checking that nothing served is ever wrong and that the
// controller's registry converges to what the nodes really hold.
//
//   fault_soak [--seconds N] [--keys-per-node K] [--seed S] [--controllers C]
//
// With --controllers C > 1 they are standbys of each other on a real
// 3-member etcd cluster (docs/operations.md): the nodes and the soak find
// the leader through etcd://, and the controller fault kills the leader
// (restarted as a standby), so every such round is a failover.
// Each node is first loaded with K chunks (default 5,000: past the 4,096 keys
// of one message). Then, until N seconds have passed, rounds of load (GETs
// of random keys from random nodes, PUTs of new keys, P2P pulls; every byte
// returned is compared with what was stored) alternate with one fault:
// SIGKILL of a node (restarted on its data dir), SIGKILL of the controller
// (restarted, empty), or Redis paused (SIGSTOP) for 1-2 s. After each fault
// the load pauses and the soak measures how long until the cluster has
// converged: three nodes alive, no resync pending, and for every key ever
// stored, the CPU and disk locations the controller reports are exactly the
// tiers each node says it holds (`exists`). Exit 0 when every round
// converged within the limit and no corrupted byte was served; prints a
// table and, last, one JSON line of figures.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstring>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "cluster_queries.h"
#include "pikv/coord/find_controllers.h"
#include "pikv/launch/etcd.h"
#include "pikv/rpc/admin_client.h"
#include "pikv/rpc/node_client.h"
#include "test_support.h"

namespace {

using namespace pikv;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr int kNodes = 3;
constexpr size_t kObjectBytes = 1024;
constexpr auto kConvergeLimit = 20s;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

class Soak {
 public:
  Soak(uint64_t seed, int keys_per_node, int controllers)
      : rng_(seed), keys_per_node_(keys_per_node), controller_ports_(controllers) {
    for (int& port : controller_ports_) port = testing::FreePort();
    controllers_.resize(controllers);
  }

  bool Run(std::chrono::seconds duration) {
    if (controllers_.size() > 1) {
      etcd_ = std::make_unique<launch::EtcdCluster>(3);
      if (Status s = etcd_->Start(); !s.ok()) throw std::runtime_error(s.ToString());
    }
    for (size_t c = 0; c < controllers_.size(); ++c) StartController(c);
    for (int i = 0; i < kNodes; ++i) StartNode(i);
    for (int i = 0; i < kNodes; ++i) Preload(i);
    std::cout << "preloaded " << keys_.size() << " chunks (" << keys_per_node_ << " per node)\n";
    if (!Converge("preload")) return false;
    const auto end = Clock::now() + duration;
    while (Clock::now() < end) {
      const auto load_until = Clock::now() + std::chrono::milliseconds(1500 + rng_() % 2000);
      while (Clock::now() < load_until) LoadStep();
      Fault();
    }
    const bool converged = Converge("final");
    Report();
    return converged && corrupted_bytes_ == 0 && max_converge_ <= kConvergeLimit;
  }

 private:
  // What nodes and the soak dial: the one controller, or the leader by etcd.
  std::string ControllerEndpoint() const { return etcd_ ? etcd_->Spec() : Endpoint(0); }
  std::string Endpoint(size_t c) const {
    return "tcp://127.0.0.1:" + std::to_string(controller_ports_[c]);
  }
  static std::string Id(int i) { return "soak-" + std::to_string(i); }

  void StartController(size_t c) {
    std::vector<std::string> args = {"--endpoint",      Endpoint(c), "--http",       "",
                                     "--suspect-after", "600ms",     "--dead-after", "1500ms",
                                     "--log-level",     "error"};
    if (etcd_) {
      for (const auto& a : etcd_->ControllerArgs()) args.push_back(a);
      args.insert(args.end(), {"--lease-ttl", "2s"});
    }
    controllers_[c] = testing::StartController(args);
  }
  // The controller that answers as leader (0 when running alone).
  size_t Leader() {
    for (size_t c = 0; etcd_ && c < controllers_.size(); ++c) {
      if (testing::ControllerRole(Endpoint(c)) == "leader") return c;
    }
    return 0;
  }
  void StartNode(int i) {
    nodes_[i] = testing::StartNode(
        {"--endpoint", "tcp://127.0.0.1:" + std::to_string(node_ports_[i]), "--data-dir",
         dirs_[i].str(), "--node-id", Id(i), "--host", "host-" + std::to_string(i), "--controller",
         ControllerEndpoint(), "--heartbeat-interval", "200ms", "--redis", redis_.address(),
         "--cpu-capacity", "256MiB", "--log-level", "error"});
    clients_[i] = std::make_unique<rpc::NodeClient>(nodes_[i].tcp, 10s);
  }

  testing::TestObject Object(uint64_t seed) { return testing::MakeObject(seed, kObjectBytes); }

  void Put(int node, const std::vector<uint64_t>& seeds) {
    std::vector<ChunkKey> keys;
    std::vector<SharedBuffer> objects;
    for (uint64_t s : seeds) {
      auto o = Object(s);
      keys.push_back(o.key);
      objects.push_back(o.bytes);
    }
    auto r = clients_[node]->Put(keys, objects);
    ops_++;
    if (!r.ok()) {
      failed_ops_++;
      return;
    }
    for (size_t i = 0; i < seeds.size(); ++i) {
      if ((*r)[i].ok()) {
        keys_.push_back(keys[i]);
        seed_of_[keys[i]] = seeds[i];
      }
    }
  }

  void Preload(int node) {
    for (int done = 0; done < keys_per_node_; done += 500) {
      std::vector<uint64_t> seeds;
      for (int i = done; i < std::min(keys_per_node_, done + 500); ++i)
        seeds.push_back(next_seed_++);
      Put(node, seeds);
    }
  }

  // Every object returned must be byte-for-byte the one stored under its key.
  void Verify(const std::vector<ChunkKey>& keys, const std::vector<Result<SharedBuffer>>& got) {
    for (size_t i = 0; i < keys.size() && i < got.size(); ++i) {
      if (!got[i].ok()) {
        misses_++;
        continue;
      }
      const auto expected = Object(seed_of_.at(keys[i]));
      const SharedBuffer& b = *got[i];
      verified_bytes_ += b.size();
      verified_objects_++;
      if (b.size() != expected.bytes.size() ||
          std::memcmp(b.data(), expected.bytes.data(), b.size()) != 0) {
        size_t wrong =
            std::max(b.size(), expected.bytes.size()) - std::min(b.size(), expected.bytes.size());
        for (size_t j = 0; j < std::min(b.size(), expected.bytes.size()); ++j)
          wrong += b.data()[j] != expected.bytes.data()[j];
        corrupted_bytes_ += wrong;
        std::cerr << "CORRUPT: " << keys[i].Hex() << " " << wrong << " bytes differ\n";
      }
    }
  }

  void LoadStep() {
    const int node = static_cast<int>(rng_() % kNodes);
    const int op = static_cast<int>(rng_() % 10);
    std::vector<ChunkKey> keys;
    for (int i = 0; i < (op < 7 ? 16 : 4); ++i) keys.push_back(keys_[rng_() % keys_.size()]);
    ops_++;
    if (op < 7) {
      auto got = clients_[node]->Get(keys);
      if (!got.ok()) {
        failed_ops_++;
        return;
      }
      Verify(keys, *got);
    } else if (op < 8) {
      ops_--;
      std::vector<uint64_t> seeds;
      for (int i = 0; i < 8; ++i) seeds.push_back(next_seed_++);
      Put(node, seeds);
    } else {
      auto got = clients_[node]->Pull(keys, "", 2s);
      if (!got.ok()) {
        failed_ops_++;
        return;
      }
      Verify(keys, *got);
    }
  }

  void Fault() {
    const int kind = static_cast<int>(rng_() % 3);
    std::string name;
    if (kind == 0) {
      const int i = static_cast<int>(rng_() % kNodes);
      name = "node SIGKILL";
      nodes_[i].process->Signal(SIGKILL);
      nodes_[i].process->Wait(5s);
      std::this_thread::sleep_for(std::chrono::milliseconds(300 + rng_() % 1200));
      StartNode(i);
    } else if (kind == 1) {
      // Alone: killed and restarted. With standbys: the leader killed, a
      // standby takes over, the killed one comes back as a standby.
      const size_t c = Leader();
      name = etcd_ ? "leader SIGKILL" : "controller SIGKILL";
      controllers_[c].process->Signal(SIGKILL);
      controllers_[c].process->Wait(5s);
      std::this_thread::sleep_for(std::chrono::milliseconds(200 + rng_() % 800));
      StartController(c);
    } else {
      name = "Redis paused";
      redis_.Pause();
      const auto until = Clock::now() + std::chrono::milliseconds(1000 + rng_() % 1000);
      while (Clock::now() < until) LoadStep();  // the load goes on against a hung Redis
      redis_.Resume();
    }
    faults_[name]++;
    Converge(name);
  }

  // Whether the controller's picture equals the nodes' own, now.
  bool Converged(std::string* why) {
    rpc::AdminClient admin(coord::FindControllers(ControllerEndpoint()), 2s);
    auto nodes = admin.Json(MsgType::kAdminNodes);
    if (!nodes.ok()) return *why = "controller: " + nodes.status().ToString(), false;
    int alive = 0;
    const json table = json::parse(*nodes);
    for (const auto& n : table["nodes"]) {
      if (n["state"] != "alive") continue;
      alive++;
      if (n["resync_pending"].get<bool>()) return *why = "resync pending", false;
    }
    if (alive != kNodes) return *why = std::to_string(alive) + " nodes alive", false;
    for (size_t first = 0; first < keys_.size(); first += 4096) {
      const std::vector<ChunkKey> batch(keys_.begin() + first,
                                        keys_.begin() + std::min(keys_.size(), first + 4096));
      auto located = admin.Locate(batch);
      if (!located.ok()) return *why = "locate: " + located.status().ToString(), false;
      for (int i = 0; i < kNodes; ++i) {
        auto masks = clients_[i]->Exists(batch);
        if (!masks.ok()) return *why = Id(i) + " exists: " + masks.status().ToString(), false;
        for (size_t k = 0; k < batch.size(); ++k) {
          TierMask said = 0;
          for (const auto& r : (*located)[k]) {
            if (r.node_id == Id(i) && r.location.tier != TierKind::kRemote)
              said |= Bit(r.location.tier);
          }
          const TierMask real = (*masks)[k] & (Bit(TierKind::kCpu) | Bit(TierKind::kDisk));
          if (said != real) {
            *why = Id(i) + " holds " + batch[k].Hex() + " as " + std::to_string(real) +
                   ", the controller says " + std::to_string(said);
            return false;
          }
        }
      }
    }
    return true;
  }

  bool Converge(const std::string& after) {
    const auto t0 = Clock::now();
    std::string why;
    while (!Converged(&why)) {
      if (Clock::now() - t0 > kConvergeLimit) {
        std::cerr << "NOT CONVERGED after " << after << ": " << why << "\n";
        max_converge_ = std::max<Clock::duration>(max_converge_, Clock::now() - t0);
        return false;
      }
      std::this_thread::sleep_for(100ms);
    }
    const auto took = Clock::now() - t0;
    converge_[after].push_back(Seconds(took));
    max_converge_ = std::max<Clock::duration>(max_converge_, took);
    return true;
  }

  void Report() {
    std::cout << "\n| fault | count | converged in (s): median | max |\n|---|---|---|---|\n";
    json per_kind = json::object();
    for (auto& [kind, times] : converge_) {
      std::sort(times.begin(), times.end());
      const int count = kind == "preload" || kind == "final" ? 1 : faults_[kind];
      std::cout << "| " << kind << " | " << count << " | " << times[times.size() / 2] << " | "
                << times.back() << " |\n";
      per_kind[kind] = {
          {"count", count}, {"median_s", times[times.size() / 2]}, {"max_s", times.back()}};
    }
    std::cout << "\noperations " << ops_ << " (failed " << failed_ops_ << "), objects verified "
              << verified_objects_ << " (" << verified_bytes_ << " bytes), misses " << misses_
              << ", corrupted bytes " << corrupted_bytes_ << ", chunks " << keys_.size() << "\n";
    int faults = 0;
    for (auto& [k, n] : faults_) faults += n;
    std::cout << json{{"operations", ops_},
                      {"failed_operations", failed_ops_},
                      {"objects_verified", verified_objects_},
                      {"bytes_verified", verified_bytes_},
                      {"corrupted_bytes", corrupted_bytes_},
                      {"chunks", keys_.size()},
                      {"faults", faults},
                      {"convergence", per_kind},
                      {"max_convergence_s", Seconds(max_converge_)}}
                     .dump()
              << "\n";
  }

  std::mt19937_64 rng_;
  const int keys_per_node_;
  testing::RedisServer redis_;
  std::unique_ptr<launch::EtcdCluster> etcd_;  // with standbys
  std::vector<int> controller_ports_;
  int node_ports_[kNodes] = {testing::FreePort(), testing::FreePort(), testing::FreePort()};
  testing::TempDir dirs_[kNodes];
  std::vector<testing::ControllerProcess> controllers_;
  testing::NodeProcess nodes_[kNodes];
  std::unique_ptr<rpc::NodeClient> clients_[kNodes];
  std::vector<ChunkKey> keys_;
  std::map<ChunkKey, uint64_t> seed_of_;
  uint64_t next_seed_ = 1;
  uint64_t ops_ = 0, failed_ops_ = 0, misses_ = 0, verified_objects_ = 0, verified_bytes_ = 0,
           corrupted_bytes_ = 0;
  std::map<std::string, int> faults_;
  std::map<std::string, std::vector<double>> converge_;
  Clock::duration max_converge_{};
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fault_soak: verifying load and random faults on a local cluster"};
  int seconds = 40, keys_per_node = 5000, controllers = 1;
  uint64_t seed = std::random_device{}();
  app.add_option("--seconds", seconds, "How long to inject faults");
  app.add_option("--keys-per-node", keys_per_node, "Chunks preloaded on each node");
  app.add_option("--seed", seed, "Random seed (printed, to reproduce a run)");
  app.add_option("--controllers", controllers, "Controllers; more than 1: standbys on etcd")
      ->check(CLI::Range(1, 5));
  CLI11_PARSE(app, argc, argv);
  if (controllers > 1 && !launch::EtcdCluster::Available()) {
    std::cout << "fault_soak: SKIPPED: etcd is not installed (apt-get install etcd-server)\n";
    return 77;
  }
  std::cout << "fault_soak: seed " << seed << ", " << seconds << " s, " << keys_per_node
            << " chunks per node, " << controllers << " controller(s)\n";
  Soak soak(seed, keys_per_node, controllers);
  const bool ok = soak.Run(std::chrono::seconds(seconds));
  std::cout << (ok ? "fault_soak: PASS" : "fault_soak: FAIL") << "\n";
  return ok ? 0 : 1;
}
