// The compose topology on Linux network namespaces: one namespace per host
// (Redis, the controller, three nodes), each with its own address on a bridge,
// joined by veth pairs. Chunks cross hosts by P2P pull; a killed node is
// detected; a host cut off (its link down) is declared dead, and rejoins and
// resyncs when the link returns; Redis cut off degrades the nodes to CPU and
// disk, and they recover when it returns. Every test runs twice: secure as
// the compose deployment is (CURVE on every tcp socket, keys made for the
// hosts, a Redis password), and with security off.
// Needs root (ip netns, veth, bridge): skips with a message where that is
// missing. Addresses are in 10.213.<n>.0/24, used only inside these namespaces.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <set>
#include <thread>

#include "cluster_queries.h"
#include "pikv/rpc/admin_client.h"
#include "pikv/rpc/node_client.h"
#include "test_support.h"

namespace pikv {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

int Sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

// One bridge in the root namespace; one namespace per host, attached by a veth pair.
class Topology {
 public:
  Topology()
      : tag_("pk" + std::to_string(getpid() % 100000)),
        subnet_("10.213." + std::to_string(getpid() % 200 + 20)) {}
  ~Topology() {
    for (const auto& h : hosts_) Sh("ip netns del " + Ns(h));
    Sh("ip link del " + tag_ + "br");
  }
  bool Create() {
    if (geteuid() != 0) return false;
    if (Sh("ip link add " + tag_ + "br type bridge") != 0) return false;
    return Sh("ip addr add " + subnet_ + ".1/24 dev " + tag_ + "br") == 0 &&
           Sh("ip link set " + tag_ + "br up") == 0;
  }
  // Adds host `name` at .<octet>; returns its address.
  std::string AddHost(const std::string& name, int octet) {
    hosts_.push_back(name);
    const std::string ns = Ns(name), outside = tag_ + name + "a", inside = tag_ + name + "b";
    const std::string ip = subnet_ + "." + std::to_string(octet);
    const bool ok = Sh("ip netns add " + ns) == 0 &&
                    Sh("ip link add " + outside + " type veth peer name " + inside) == 0 &&
                    Sh("ip link set " + inside + " netns " + ns) == 0 &&
                    Sh("ip link set " + outside + " master " + tag_ + "br") == 0 &&
                    Sh("ip link set " + outside + " up") == 0 &&
                    Sh("ip netns exec " + ns + " ip addr add " + ip + "/24 dev " + inside) == 0 &&
                    Sh("ip netns exec " + ns + " ip link set " + inside + " up") == 0 &&
                    Sh("ip netns exec " + ns + " ip link set lo up") == 0;
    if (!ok) ADD_FAILURE() << "could not create host " << name;
    return ip;
  }
  void Link(const std::string& name, bool up) {
    ASSERT_EQ(Sh("ip link set " + tag_ + name + "a " + (up ? "up" : "down")), 0);
  }
  std::vector<std::string> Exec(const std::string& name) const {
    return {"ip", "netns", "exec", Ns(name)};
  }

 private:
  std::string Ns(const std::string& name) const { return tag_ + "-" + name; }
  std::string tag_, subnet_;
  std::vector<std::string> hosts_;
};

class MultiHostTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam()) keys_.emplace(std::vector<std::string>{Id(0), Id(1), Id(2)});
    if (!topo_.Create())
      GTEST_SKIP() << "needs root with ip netns, veth and bridges; skipping the multi-host test";
    redis_ip_ = topo_.AddHost("rd", 10);
    ctl_ip_ = topo_.AddHost("ct", 11);
    for (int i = 0; i < 3; ++i) node_ip_[i] = topo_.AddHost("h" + std::to_string(i + 1), 21 + i);
    auto rd = topo_.Exec("rd");
    std::vector<std::string> redis = {
        rd[1],   rd[2],     rd[3], "redis-server", "--bind", redis_ip_,          "--port",
        "6379",  "--save",  "",    "--appendonly", "no",     "--protected-mode", "no",
        "--dir", dir_.str()};
    if (keys_) redis.insert(redis.end(), {"--requirepass", RedisPassword()});
    redis_ = std::make_unique<testing::ChildProcess>(rd[0], redis);
    controller_ = testing::StartController(
        WithKeys("controller",
                 {"--endpoint", "tcp://" + ctl_ip_ + ":7300", "--http", "", "--suspect-after",
                  "600ms", "--dead-after", "1500ms", "--log-level", "error"}),
        topo_.Exec("ct"));
    for (int i = 0; i < 3; ++i) StartNode(i);
    WaitFor([&] { return Alive() == 3; }, 15s, "three nodes alive across namespaces");
  }
  void TearDown() override {
    for (auto& n : nodes_) {
      if (n.process) n.process->Signal(SIGKILL);
    }
    if (controller_.process) controller_.process->Signal(SIGKILL);
    if (redis_) redis_->Signal(SIGKILL);
  }
  void StartNode(int i) {
    nodes_[i] = testing::StartNode(
        WithKeys("node-" + Id(i),
                 {"--endpoint", "tcp://" + node_ip_[i] + ":7400", "--data-dir", dirs_[i].str(),
                  "--node-id", Id(i), "--host", Id(i), "--controller", "tcp://" + ctl_ip_ + ":7300",
                  "--redis", redis_ip_ + ":6379", "--redis-password", RedisPassword(),
                  "--heartbeat-interval", "200ms", "--log-level", "error"}),
        topo_.Exec(Id(i)));
  }
  static std::string Id(int i) { return "h" + std::to_string(i + 1); }
  std::vector<std::string> WithKeys(const std::string& member, std::vector<std::string> args) {
    return testing::WithKeys(keys_, member, std::move(args));
  }
  // Secure as compose is: a Redis password too ("" turns it off).
  std::string RedisPassword() const { return keys_ ? "multihost-secret" : ""; }
  // The admin's keys to dial node i (or the controller, i < 0); none when off.
  std::optional<CurveClientKeys> Admin(int i = -1) const {
    return testing::DialKeys(keys_, "admin", i < 0 ? "" : Id(i));
  }
  rpc::NodeClient Node(int i, std::chrono::milliseconds timeout) const {
    return rpc::NodeClient("tcp://" + node_ip_[i] + ":7400", timeout, WireLimits{}, Admin(i));
  }
  std::string Controller() const { return "tcp://" + ctl_ip_ + ":7300"; }
  int Alive() { return testing::AliveNodes(Controller(), Admin()); }
  std::set<std::string> Holders(const ChunkKey& key) {
    return testing::Holders(Controller(), key, Admin());
  }
  int64_t Stat(int i, const std::string& name) {
    rpc::NodeClient c = Node(i, 2s);
    auto s = c.Stats();
    return s.ok() ? FieldInt(*s, name, -1) : -1;
  }
  template <typename Cond>
  std::chrono::milliseconds WaitFor(Cond cond, std::chrono::milliseconds limit,
                                    const std::string& what) {
    auto t0 = Clock::now();
    while (!cond()) {
      if (Clock::now() - t0 > limit) {
        ADD_FAILURE() << "timed out waiting for " << what;
        break;
      }
      std::this_thread::sleep_for(50ms);
    }
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
  }
  void Put(int i, const testing::TestObject& o) {
    rpc::NodeClient c = Node(i, 5s);
    auto r = c.Put({&o.key, 1}, {&o.bytes, 1});
    ASSERT_TRUE(r.ok() && (*r)[0].ok());
  }

  std::optional<testing::TestKeys> keys_;  // security on
  Topology topo_;
  testing::TempDir dir_, dirs_[3];
  std::string redis_ip_, ctl_ip_, node_ip_[3];
  std::unique_ptr<testing::ChildProcess> redis_;
  testing::ControllerProcess controller_;
  testing::NodeProcess nodes_[3];
};

TEST_P(MultiHostTest, P2PPullsCrossHosts) {
  auto o = testing::MakeObject(1, 256 << 10);
  Put(0, o);
  WaitFor([&] { return Holders(o.key).count("h1") == 1; }, 5s, "h1's chunk located");
  rpc::NodeClient h2 = Node(1, 5s);
  auto pulled = h2.Pull({&o.key, 1}, "tcp://" + node_ip_[0] + ":7400", 3s);
  ASSERT_TRUE(pulled.ok()) << pulled.status().ToString();
  ASSERT_TRUE((*pulled)[0].ok());
  EXPECT_EQ((*pulled)[0]->size(), o.bytes.size());
  EXPECT_EQ(Stat(1, "p2p.pulled_objects"), 1);
  WaitFor(
      [&] {
        return Holders(o.key) == std::set<std::string>{"h1", "h2"};
      },
      5s, "the copy on h2 located");
}

TEST_P(MultiHostTest, AKilledNodeIsDetectedAndItsEntriesRemoved) {
  auto o = testing::MakeObject(2, 64 << 10);
  Put(2, o);
  WaitFor([&] { return Holders(o.key).count("h3") == 1; }, 5s, "h3's chunk located");
  nodes_[2].process->Signal(SIGKILL);
  auto took = WaitFor([&] { return Holders(o.key).empty(); }, 10s, "h3's entries removed");
  EXPECT_LE(took, 1500ms + 1500ms);
}

TEST_P(MultiHostTest, AHostCutOffIsDeclaredDeadThenRejoinsAndResyncs) {
  auto o = testing::MakeObject(3, 64 << 10);
  Put(0, o);
  WaitFor([&] { return Holders(o.key).count("h1") == 1; }, 5s, "h1's chunk located");
  topo_.Link("h1", false);
  WaitFor([&] { return Holders(o.key).empty(); }, 10s, "h1 declared dead while cut off");
  EXPECT_EQ(Alive(), 2);
  topo_.Link("h1", true);
  auto back = WaitFor([&] { return Holders(o.key).count("h1") == 1; }, 15s,
                      "h1 rejoined with its inventory");
  EXPECT_EQ(Alive(), 3);
  std::cout << "h1 rejoined and resynced " << back.count() << " ms after its link came back\n";
}

TEST_P(MultiHostTest, RedisCutOffDegradesToCpuAndDiskAndRecovers) {
  auto before = testing::MakeObject(4, 64 << 10);
  Put(1, before);
  WaitFor([&] { return Stat(1, "remote.admits") >= 1; }, 5s, "the first write reached Redis");
  topo_.Link("rd", false);
  auto during = testing::MakeObject(5, 64 << 10);
  Put(1, during);  // still accepted: CPU and disk take it
  rpc::NodeClient h2 = Node(1, 10s);
  auto got = h2.Get({&during.key, 1});
  ASSERT_TRUE(got.ok() && (*got)[0].ok()) << "served from CPU with Redis unreachable";
  WaitFor([&] { return Stat(1, "remote.errors") >= 1 || Stat(1, "remote.rejects") >= 1; }, 10s,
          "remote failures counted");
  topo_.Link("rd", true);
  const int64_t admits = Stat(1, "remote.admits");
  bool recovered = false;
  for (int i = 0; i < 60 && !recovered; ++i) {
    Put(1, testing::MakeObject(100 + i, 16 << 10));
    std::this_thread::sleep_for(250ms);
    recovered = Stat(1, "remote.admits") > admits;
  }
  EXPECT_TRUE(recovered) << "writes to Redis did not resume after its link came back";
}

INSTANTIATE_TEST_SUITE_P(SecurityOnAndOff, MultiHostTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Secure" : "Insecure"; });

}  // namespace
}  // namespace pikv
