// The compose topology on Linux network namespaces: one namespace per host
// (Redis, the controller, three nodes), each with its own address, joined by
// veth pairs to a bridge. Chunks cross hosts by P2P pull; a killed node is
// detected; a host cut off (its link down) is declared dead, and rejoins and
// resyncs when the link returns; Redis cut off degrades the nodes to CPU and
// disk, and they recover when it returns. Every test runs twice: secure as
// the compose deployment is (CURVE on every tcp socket, keys made for the
// hosts, a Redis password), and with security off; and once more (secure)
// with the host's iptables FORWARD policy DROP, as starting dockerd sets it.
//
// Nothing of it is on the host: the bridge lives in a namespace of its own
// (the switch), so the host's firewall never sees a frame of it, and the test
// process itself leaves the host's namespace for one of its own before the
// first test (the admin/engine side, .2 on the switch). Each namespace is held
// by a child process (unshare --net sleep) that dies with this process, so no
// namespace, link or bridge outlives the test, even one killed mid-test;
// nothing is named under /var/run/netns. At its end the suite checks that
// nothing it made is left. Addresses are in 10.213.0.0/24, inside the switch.
// Needs root (namespaces, veth, bridges): skips with a message where that is
// missing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "cluster_queries.h"
#include "pikv/launch/etcd.h"
#include "pikv/rpc/admin_client.h"
#include "pikv/rpc/node_client.h"
#include "test_support.h"

namespace pikv {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

int Sh(const std::string& cmd) { return std::system(("{ " + cmd + "; } >/dev/null 2>&1").c_str()); }

// What a shell line prints on stdout ("" if it cannot run).
std::string Capture(const std::string& cmd) {
  FILE* f = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!f) return "";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

// The network namespace of process `pid` ("net:[4026532177]"), or "".
std::string NetnsOf(pid_t pid) {
  std::error_code ec;
  auto link = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/ns/net", ec);
  return ec ? "" : link.string();
}

// This process's children (pid: command) in network namespace `ns`. (A
// namespace's id can be reused once it is gone: other processes in it are
// someone else's.)
std::vector<std::string> ChildrenIn(const std::string& ns) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (NetnsOf(std::stoi(pid)) != ns) continue;
    // /proc/<pid>/stat: pid (comm) state ppid ...
    const std::string stat = Capture("cat /proc/" + pid + "/stat");
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(stat.substr(paren + 1));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid != getpid()) continue;
    out.push_back(pid + ": " + stat.substr(0, paren + 1));
  }
  return out;
}

// Where the suite runs. The test process moves to a network namespace of its
// own before the first test; the host's stays open here for the commands that
// must run there (the firewall's, the check that nothing was left).
struct Suite {
  std::string unavailable = "the multi-host environment did not run";  // "" when ready
  int host_ns_fd = -1;
  std::vector<std::string> made;  // the namespaces the suite made ("net:[…]"; ids are reused)
  int namespaces = 0;             // how many
  // `cmd` (a command line, not a shell line) run in the host's namespace.
  std::string OnHost(const std::string& cmd) const {
    return "nsenter --net=/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(host_ns_fd) +
           " " + cmd;
  }
};
Suite& TheSuite() {
  static Suite suite;
  return suite;
}

// Names that begin with "pk<pid>" (the earlier suite's prefix for its links,
// bridge and namespaces on the host), one per line of `listing`.
std::vector<std::string> WithOurPrefix(const std::string& listing) {
  const std::string prefix = "pk" + std::to_string(getpid());
  std::vector<std::string> out;
  for (const auto& line : Lines(listing)) {
    for (size_t at = line.find(prefix); at != std::string::npos; at = line.find(prefix, at + 1)) {
      const bool starts = at == 0 || !std::isalnum(static_cast<unsigned char>(line[at - 1]));
      const size_t end = at + prefix.size();
      if (starts && (end == line.size() || !std::isdigit(static_cast<unsigned char>(line[end])))) {
        out.push_back(line);
        break;
      }
    }
  }
  return out;
}

class MultiHostEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    Suite& s = TheSuite();
    if (geteuid() != 0) {
      s.unavailable = "needs root (network namespaces, veth, bridges)";
      return;
    }
    if (Sh("command -v ip && command -v nsenter && command -v unshare") != 0) {
      s.unavailable = "needs ip (iproute2), nsenter and unshare (util-linux)";
      return;
    }
    // ZeroMQ opens the suite's connections on its I/O thread, started by the
    // first socket: every thread must be in the suite's namespace, so this
    // one must be the only thread when it moves.
    std::error_code ec;
    const auto threads = std::distance(std::filesystem::directory_iterator("/proc/self/task", ec),
                                       std::filesystem::directory_iterator());
    if (threads != 1) {
      ADD_FAILURE() << threads << " threads before the suite's namespace was entered";
      s.unavailable = "other threads run in the host's namespace";
      return;
    }
    s.host_ns_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (s.host_ns_fd < 0 || unshare(CLONE_NEWNET) != 0) {
      s.unavailable = std::string("cannot make a network namespace: ") + strerror(errno);
      return;
    }
    s.made.push_back(NetnsOf(getpid()));
    if (Sh("ip link set lo up") != 0) {
      s.unavailable = "cannot bring lo up in a new network namespace";
      return;
    }
    s.unavailable.clear();
  }

  // Nothing the suite made is left: no link in its own namespace but lo (it
  // ends with this process), no process in any other namespace it made (a
  // namespace without processes goes with its links and bridge), nothing on
  // the host with its prefix.
  void TearDown() override {
    Suite& s = TheSuite();
    if (s.host_ns_fd < 0) return;
    std::vector<std::string> left;
    for (const auto& line : Lines(Capture("ip -o link"))) {
      if (line.find(": lo:") == std::string::npos)
        left.push_back("in the suite's namespace: " + line);
    }
    for (size_t i = 1; i < s.made.size(); ++i) {
      for (const auto& p : ChildrenIn(s.made[i]))
        left.push_back("a process in " + s.made[i] + ": " + p);
    }
    for (const std::string what : {"ip -o link", "ip -o addr", "ip netns list"}) {
      const std::string listing = Capture(s.OnHost(what));
      if (listing.empty() && what != "ip netns list")
        ADD_FAILURE() << "could not list the host's namespace (" << what << ")";
      for (const auto& line : WithOurPrefix(listing))
        left.push_back("on the host (" + what + "): " + line);
    }
    for (const auto& what : left) ADD_FAILURE() << "left behind " << what;
    if (left.empty())
      std::cout << "multi-host suite: made " << s.namespaces
                << " namespaces, left none, left nothing on the host\n";
  }
};
[[maybe_unused]] ::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new MultiHostEnvironment);

// A network namespace that lives as long as its holder, a child process
// (unshare --net sleep infinity) that dies with this process however it ends.
class Netns {
 public:
  bool Start() {
    holder_ = std::make_unique<testing::ChildProcess>(
        "unshare", std::vector<std::string>{"--net", "sleep", "infinity"});
    const std::string mine = NetnsOf(getpid());
    for (auto t0 = Clock::now(); Clock::now() - t0 < 10s; std::this_thread::sleep_for(5ms)) {
      id_ = NetnsOf(holder_->pid());
      if (!id_.empty() && id_ != mine) {
        ++TheSuite().namespaces;
        auto& made = TheSuite().made;
        if (std::find(made.begin(), made.end(), id_) == made.end()) made.push_back(id_);
        return true;
      }
      if (!holder_->Running()) break;
    }
    id_.clear();
    return false;
  }
  bool started() const { return !id_.empty(); }
  const std::string& id() const { return id_; }
  // Runs a command (`In() + "ip link"`) or a program (`Prefix()`) in it.
  std::string In() const { return "nsenter -t " + std::to_string(holder_->pid()) + " -n "; }
  std::vector<std::string> Prefix() const {
    return {"nsenter", "-t", std::to_string(holder_->pid()), "-n"};
  }
  std::string pid() const { return std::to_string(holder_->pid()); }
  void Stop() { holder_.reset(); }  // SIGKILL and reaped

 private:
  std::unique_ptr<testing::ChildProcess> holder_;
  std::string id_;
};

// The switch: a bridge in a namespace of its own; a namespace per host,
// attached by a veth pair (`<name>` on the switch, eth0 in the host); this
// process attached as .2. Destroy() (also the destructor) deletes every link,
// then the namespaces; the processes in them must be gone first.
class Topology {
 public:
  static constexpr const char* kSubnet = "10.213.0";

  Topology() : client_("sw" + std::to_string(++made_)) {}
  ~Topology() { Destroy(); }

  bool Create() {
    if (!switch_.Start()) return false;
    const std::string sw = switch_.In();
    if (Sh(sw + "ip link add br0 type bridge") != 0 || Sh(sw + "ip link set br0 up") != 0 ||
        Sh(sw + "ip link add cl type veth peer name " + client_ + " netns " +
           std::to_string(getpid())) != 0)
      return false;
    attached_ = true;
    return Sh(sw + "ip link set cl master br0 up") == 0 &&
           Sh("ip addr add " + std::string(kSubnet) + ".2/24 dev " + client_) == 0 &&
           Sh("ip link set " + client_ + " up") == 0;
  }
  // Adds host `name` at .<octet>; returns its address.
  std::string AddHost(const std::string& name, int octet) {
    const std::string ip = std::string(kSubnet) + "." + std::to_string(octet);
    Netns& host = hosts_[name];
    bool ok = host.Start();
    ok = ok && Sh(switch_.In() + "ip link add " + name + " type veth peer name eth0 netns " +
                  host.pid()) == 0;
    ok = ok && Sh(switch_.In() + "ip link set " + name + " master br0 up") == 0 &&
         Sh(host.In() + "ip addr add " + ip + "/24 dev eth0") == 0 &&
         Sh(host.In() + "ip link set eth0 up") == 0 && Sh(host.In() + "ip link set lo up") == 0;
    if (!ok) ADD_FAILURE() << "could not create host " << name;
    return ip;
  }
  // Host `name`'s link to the switch up or down (the switch's end of it).
  void Link(const std::string& name, bool up) {
    ASSERT_EQ(Sh(switch_.In() + "ip link set " + name + (up ? " up" : " down")), 0);
  }
  std::vector<std::string> Exec(const std::string& name) const { return hosts_.at(name).Prefix(); }

  void Destroy() {
    // Each veth pair is deleted here and now, both ends: a namespace can
    // outlive its last process for minutes (sockets its killed processes
    // left, closing) and with it any link that is only deleted with it.
    if (attached_) {
      Sh("ip link del " + client_);
      if (Sh("ip link show " + client_) == 0) ADD_FAILURE() << "could not delete " << client_;
      attached_ = false;
    }
    if (switch_.started()) {
      for (const auto& [name, host] : hosts_) {
        Sh(switch_.In() + "ip link del " + name);
        if (Sh(switch_.In() + "ip link show " + name) == 0)
          ADD_FAILURE() << "could not delete the link of " << name;
      }
    }
    std::vector<std::string> ids;
    for (auto& [name, host] : hosts_) {
      if (host.started()) ids.push_back(host.id());
      host.Stop();
    }
    hosts_.clear();
    if (switch_.started()) ids.push_back(switch_.id());
    switch_.Stop();
    for (const auto& id : ids) {
      for (const auto& p : ChildrenIn(id)) ADD_FAILURE() << "still running in " << id << ": " << p;
    }
  }

 private:
  static inline int made_ = 0;
  std::string client_;  // this process's end of its link to the switch
  bool attached_ = false;
  Netns switch_;
  std::map<std::string, Netns> hosts_;
};

// Sets the host's iptables FORWARD policy to DROP, as starting dockerd does,
// and passes bridged frames through iptables (bridge-nf-call-iptables=1, as
// with docker's br_netfilter) where the host has that setting. Restore() (and
// the destructor) puts both back as found; should this process die first, a
// watcher started here (a shell detached from this process, reading a pipe
// only this process writes) puts them back when the pipe closes.
class HostForwardDrop {
 public:
  HostForwardDrop() {
    const Suite& s = TheSuite();
    if (Sh("command -v iptables") != 0) {
      unavailable_ = "iptables is not installed: skipping the test with the FORWARD policy DROP";
      return;
    }
    rules_ = Capture(s.OnHost("iptables -S FORWARD"));
    const std::string head = "-P FORWARD ";
    if (rules_.rfind(head, 0) != 0) {
      unavailable_ = "iptables -S FORWARD did not show the policy: " + rules_;
      return;
    }
    policy_ = rules_.substr(head.size(), rules_.find('\n') - head.size());
    bridge_ = Capture(s.OnHost("cat /proc/sys/net/bridge/bridge-nf-call-iptables"));
    bridge_ = bridge_.substr(0, bridge_.find('\n'));
    if (!StartWatcher()) {
      unavailable_ = "could not start the watcher that restores the FORWARD policy";
      return;
    }
    active_ = true;
    if (Sh(s.OnHost("iptables -P FORWARD DROP")) != 0) ADD_FAILURE() << "iptables -P FORWARD DROP";
    if (bridge_ == "0")
      Sh(s.OnHost("sh -c 'echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables'"));
    std::cout << "host: iptables FORWARD policy DROP (was " << policy_
              << "), bridge-nf-call-iptables "
              << (bridge_.empty() ? "absent (no br_netfilter)" : "1 (was " + bridge_ + ")") << "\n";
  }
  ~HostForwardDrop() { Restore(); }
  HostForwardDrop(const HostForwardDrop&) = delete;
  HostForwardDrop& operator=(const HostForwardDrop&) = delete;
  const std::string& unavailable() const { return unavailable_; }

  void Restore() {
    if (!active_) return;
    active_ = false;
    const Suite& s = TheSuite();
    if (Sh(s.OnHost("iptables -P FORWARD " + policy_)) != 0)
      ADD_FAILURE() << "could not restore the FORWARD policy " << policy_;
    if (bridge_ == "0")
      Sh(s.OnHost("sh -c 'echo 0 > /proc/sys/net/bridge/bridge-nf-call-iptables'"));
    // The watcher has nothing left to do.
    [[maybe_unused]] ssize_t n = write(watcher_fd_, "done\n", 5);
    close(watcher_fd_);
    EXPECT_EQ(Capture(s.OnHost("iptables -S FORWARD")), rules_)
        << "the host's FORWARD chain is not as it was found";
    if (!bridge_.empty()) {
      std::string now = Capture(s.OnHost("cat /proc/sys/net/bridge/bridge-nf-call-iptables"));
      EXPECT_EQ(now.substr(0, now.find('\n')), bridge_);
    }
  }

 private:
  bool StartWatcher() {
    const std::string script =
        "PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH; read -r said; [ \"$said\" = done ] && exit 0; "
        "iptables -S FORWARD | grep -qx -- '-P FORWARD DROP' && iptables -P FORWARD " +
        policy_ + "; " +
        (bridge_ == "0" ? "echo 0 > /proc/sys/net/bridge/bridge-nf-call-iptables; " : "") +
        "exit 0";
    const char* argv[] = {"/bin/sh", "-c", script.c_str(), nullptr};
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return false;
    const int host_ns = TheSuite().host_ns_fd;
    const pid_t middle = fork();
    if (middle == 0) {
      // Detached (its parent exits at once): it outlives this process, and
      // whatever kills this process's children (ctest's timeout) misses it.
      setsid();
      if (fork() != 0) _exit(0);
      if (setns(host_ns, CLONE_NEWNET) != 0) _exit(1);
      dup2(fds[0], STDIN_FILENO);
      const int null = open("/dev/null", O_RDWR);
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
      close(fds[1]);
      execv(argv[0], const_cast<char* const*>(argv));
      _exit(127);
    }
    close(fds[0]);
    if (middle < 0) {
      close(fds[1]);
      return false;
    }
    waitpid(middle, nullptr, 0);
    watcher_fd_ = fds[1];
    return true;
  }

  std::string unavailable_, rules_, policy_, bridge_;
  bool active_ = false;
  int watcher_fd_ = -1;
};

struct Mode {
  bool secure;
  bool host_forward_drop;
};
void PrintTo(const Mode& m, std::ostream* os) {
  *os << (m.secure ? "secure" : "insecure")
      << (m.host_forward_drop ? ", host FORWARD policy DROP" : "");
}

class MultiHostTest : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    if (!TheSuite().unavailable.empty())
      GTEST_SKIP() << TheSuite().unavailable << "; skipping the multi-host test";
    if (GetParam().host_forward_drop) {
      drop_.emplace();
      if (!drop_->unavailable().empty()) GTEST_SKIP() << drop_->unavailable();
    }
    if (GetParam().secure) keys_.emplace(std::vector<std::string>{Id(0), Id(1), Id(2)});
    if (!topo_.Create())
      GTEST_SKIP() << "cannot make a bridge and veth pairs in network namespaces; skipping the "
                      "multi-host test";
    redis_ip_ = topo_.AddHost("rd", 10);
    ctl_ip_ = topo_.AddHost("ct", 11);
    for (int i = 0; i < 3; ++i) node_ip_[i] = topo_.AddHost(Id(i), 21 + i);
    auto rd = topo_.Exec("rd");
    std::vector<std::string> redis(rd.begin() + 1, rd.end());
    redis.insert(redis.end(),
                 {"redis-server", "--bind", redis_ip_, "--port", "6379", "--save", "",
                  "--appendonly", "no", "--protected-mode", "no", "--dir", dir_.str()});
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
  // Every process killed and reaped, then the topology deleted, then the
  // host's firewall put back (the members' destructors do the same, in that
  // order, should SetUp have thrown).
  void TearDown() override {
    for (auto& n : nodes_) {
      if (n.process) n.process->Signal(SIGKILL);
    }
    if (controller_.process) controller_.process->Signal(SIGKILL);
    if (redis_) redis_->Signal(SIGKILL);
    for (auto& n : nodes_) n.process.reset();
    controller_.process.reset();
    redis_.reset();
    topo_.Destroy();
    drop_.reset();
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

  std::optional<HostForwardDrop> drop_;    // destroyed last
  std::optional<testing::TestKeys> keys_;  // security on
  Topology topo_;                          // destroyed after the processes
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

// Standby controllers across hosts (docs/operations.md): three etcd
// members and two controllers on hosts of their own, two nodes following
// the leader by etcd://. The leader's host is cut off the network: it
// cannot renew its lease, stops leading on its own clock, and the standby
// takes over; an etcd member's host cut off changes nothing.
class MultiHostLeadershipTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (!TheSuite().unavailable.empty())
      GTEST_SKIP() << TheSuite().unavailable << "; skipping the multi-host test";
    if (!launch::EtcdCluster::Available()) GTEST_SKIP() << "etcd is not installed";
    if (GetParam()) keys_.emplace(std::vector<std::string>{"h1", "h2"});
    if (!topo_.Create())
      GTEST_SKIP() << "cannot make a bridge and veth pairs in network namespaces";
    std::vector<launch::EtcdMember> members;
    for (int m = 0; m < 3; ++m) {
      const std::string name = "e" + std::to_string(m + 1);
      members.push_back({topo_.AddHost(name, 31 + m), topo_.Exec(name)});
    }
    etcd_ = std::make_unique<launch::EtcdCluster>(members);
    ASSERT_TRUE(etcd_->Start().ok());
    for (int c = 0; c < 2; ++c) {
      ctl_ip_[c] = topo_.AddHost(Ctl(c), 11 + c);
      std::vector<std::string> args = {"--endpoint",   Controller(c), "--http",          "",
                                       "--lease-ttl",  "2s",          "--suspect-after", "600ms",
                                       "--dead-after", "1500ms",      "--log-level",     "error"};
      for (const auto& a : etcd_->ControllerArgs()) args.push_back(a);
      controllers_[c] = testing::StartController(testing::WithKeys(keys_, "controller", args),
                                                 topo_.Exec(Ctl(c)));
    }
    for (int i = 0; i < 2; ++i) {
      const std::string id = "h" + std::to_string(i + 1);
      node_ip_[i] = topo_.AddHost(id, 21 + i);
      nodes_[i] = testing::StartNode(
          testing::WithKeys(
              keys_, "node-" + id,
              {"--endpoint", "tcp://" + node_ip_[i] + ":7400", "--data-dir", dirs_[i].str(),
               "--node-id", id, "--host", id, "--controller", etcd_->Spec(), "--heartbeat-interval",
               "200ms", "--log-level", "error"}),
          topo_.Exec(id));
    }
    object_ = testing::MakeObject(9, 64 << 10);
    rpc::NodeClient h1("tcp://" + node_ip_[0] + ":7400", 5s, WireLimits{},
                       testing::DialKeys(keys_, "admin", "h1"));
    ASSERT_TRUE(h1.Put({&object_.key, 1}, {&object_.bytes, 1}).ok());
    ASSERT_TRUE(WaitUntil([&] { return Holders() == std::set<std::string>{"h1"}; }, 15s));
  }
  void TearDown() override {
    for (auto& n : nodes_) n.process.reset();
    for (auto& c : controllers_) c.process.reset();
    etcd_.reset();
    topo_.Destroy();
  }
  static std::string Ctl(int c) { return "c" + std::to_string(c + 1); }
  std::string Controller(int c) const { return "tcp://" + ctl_ip_[c] + ":7300"; }
  std::string Spec() const { return etcd_->Spec(); }
  std::set<std::string> Holders() {
    return testing::Holders(Spec(), object_.key, testing::DialKeys(keys_, "admin"));
  }
  // The controller that answers as leader for itself, or -1.
  int Leader() const {
    for (int c = 0; c < 2; ++c) {
      if (testing::ControllerRole(Controller(c), testing::DialKeys(keys_, "admin")) == "leader")
        return c;
    }
    return -1;
  }
  template <typename Cond>
  static bool WaitUntil(Cond cond, std::chrono::milliseconds limit) {
    for (auto t0 = Clock::now(); !cond(); std::this_thread::sleep_for(50ms)) {
      if (Clock::now() - t0 > limit) return false;
    }
    return true;
  }

  std::optional<testing::TestKeys> keys_;
  Topology topo_;  // destroyed after the processes
  std::unique_ptr<launch::EtcdCluster> etcd_;
  std::string ctl_ip_[2], node_ip_[2];
  testing::ControllerProcess controllers_[2];
  testing::TempDir dirs_[2];
  testing::NodeProcess nodes_[2];
  testing::TestObject object_;
};

TEST_P(MultiHostLeadershipTest, LeaderCutOffIsReplacedAndRejoinsAsAStandby) {
  const int leader = Leader();
  ASSERT_GE(leader, 0);
  const int standby = 1 - leader;
  const auto t0 = Clock::now();
  topo_.Link(Ctl(leader), false);
  ASSERT_TRUE(WaitUntil([&] { return Leader() == standby; }, 10s)) << "the standby did not lead";
  ASSERT_TRUE(WaitUntil([&] { return Holders() == std::set<std::string>{"h1"}; }, 10s))
      << "the registry was not rebuilt";
  std::cout << "leader cut off: the standby led and the registry was whole after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()
            << " ms\n";
  topo_.Link(Ctl(leader), true);
  // Its lease ran out while it was cut off: it answers as a standby, and
  // the new leader leads on. A role query has 300 ms, which one can miss
  // under TSan on a loaded machine (CI saw Leader() -1), so the
  // leader is asked until it answers; the old one must never claim to lead.
  std::this_thread::sleep_for(2s);
  EXPECT_NE(testing::ControllerRole(Controller(leader), testing::DialKeys(keys_, "admin")),
            "leader");
  EXPECT_TRUE(WaitUntil([&] { return Leader() == standby; }, 5s)) << "the new leader stopped";
  EXPECT_EQ(testing::AliveNodes(Spec(), testing::DialKeys(keys_, "admin")), 2);
}

TEST_P(MultiHostLeadershipTest, EtcdMemberCutOffKeepsTheLeader) {
  const int leader = Leader();
  ASSERT_GE(leader, 0);
  topo_.Link("e1", false);
  std::this_thread::sleep_for(4s);  // two lease TTLs
  EXPECT_EQ(Leader(), leader);
  // The leader itself, not through etcd: finding it by etcd:// may spend a
  // 1 s query's deadline on the member cut off (an ASan build did), and the
  // registry is what this checks.
  EXPECT_EQ(testing::Holders(Controller(leader), object_.key, testing::DialKeys(keys_, "admin")),
            std::set<std::string>{"h1"});
  topo_.Link("e1", true);
}

INSTANTIATE_TEST_SUITE_P(SecurityOnAndOff, MultiHostLeadershipTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Secure" : "Insecure"; });

std::string ModeName(const ::testing::TestParamInfo<Mode>& info) {
  return info.param.secure ? "Secure" : "Insecure";
}
INSTANTIATE_TEST_SUITE_P(SecurityOnAndOff, MultiHostTest,
                         ::testing::Values(Mode{true, false}, Mode{false, false}), ModeName);
// The same with the host's FORWARD policy DROP: nothing the topology does
// crosses the host's firewall.
INSTANTIATE_TEST_SUITE_P(HostForwardDrop, MultiHostTest, ::testing::Values(Mode{true, true}),
                         ModeName);

}  // namespace
}  // namespace pikv
