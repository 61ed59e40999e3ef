// What a hostile or careless network does to a real cluster (controller and
// three pikv-node processes): unusable or ever-changing peer addresses in
// pulls and registrations, peers that never answer, half-sent HTTP requests,
// inventories larger than one message. Each test reproduces a defect that
// once killed or wedged a process (issue 9) and asserts it no longer does.
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <zmq.hpp>

#include "cluster_fixture.h"
#include "fake_node.h"
#include "pikv/transport/zmq_frames.h"

namespace pikv::controller {
namespace {

using testing::FakeNode;
using testing::MakeObject;
using testing::TestObject;

size_t OpenFiles(pid_t pid) {
  size_t n = 0;
  DIR* d = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (!d) return 0;
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

class HostileInputTest : public ClusterTest {};

TEST_F(HostileInputTest, APullNamingAnUnusablePeerIsRefusedAndTheNodeLives) {
  auto o = MakeObject(1, 8 << 10);
  rpc::NodeClient a(nodes_[0].tcp, 3s);
  for (const std::string from : {"garbage", "tcp://", "ipc://", "udp://1.2.3.4:5",
                                 "tcp://127.0.0.1:0", "tcp://a;b:1", "tcp://[zz]:1"}) {
    auto r = a.Pull({&o.key, 1}, from, 500ms);
    EXPECT_EQ(r.code(), ErrorCode::kInvalidArgument) << from;
    ASSERT_TRUE(a.Ping().ok()) << "the node died on a pull from " << from;
  }
}

TEST_F(HostileInputTest, ARegistrationWithAnUnusableAddressOrNameIsRefused) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"tcp", "garbage"},    {"tcp", "tcp://"},     {"tcp", "udp://1.2.3.4:5"},
      {"id", "bad\xff\xfe"}, {"id", "line\nbreak"}, {"host", "h\xc3\x28"}};
  for (const auto& [what, value] : bad) {
    FakeNode fake(Endpoint(), what == "id" ? value : "fake");
    auto r = what == "host" ? fake.Register("tcp://127.0.0.1:9", value)
                            : fake.Register(what == "tcp" ? value : "tcp://127.0.0.1:9");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->header.status, ErrorCode::kInvalidArgument) << what << " " << value;
  }
  // The controller still answers everything, and lists only real nodes.
  auto nodes = Admin(MsgType::kAdminNodes);
  ASSERT_FALSE(nodes.is_null());
  EXPECT_EQ(nodes["nodes"].size(), 3u);
  EXPECT_FALSE(Admin(MsgType::kAdminStats).is_null());
}

TEST_F(HostileInputTest, PullsNamingOnePeerInManySpellingsKeepConnectionsBounded) {
  auto o = MakeObject(2, 16 << 10);
  Put(1, o);
  WaitFor([&] { return Locate(o.key).count({"node-b", TierKind::kCpu}) == 1; }, 5s, "located");
  const std::string port = nodes_[1].tcp.substr(nodes_[1].tcp.rfind(':') + 1);
  rpc::NodeClient a(nodes_[0].tcp, 5s);
  ASSERT_TRUE(a.Pull({&o.key, 1}, nodes_[1].tcp, 2s).ok());
  const size_t before = OpenFiles(nodes_[0].process->pid());
  int pulled = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 1200; ++i) {
    ASSERT_LT(std::chrono::steady_clock::now() - t0, 60s) << "pulls stalled after " << i;
    const std::string from = "tcp://127.0.0." + std::to_string(1 + i % 250) + ":" + port;
    auto r = a.Pull({&o.key, 1}, from, 2s);
    ASSERT_TRUE(r.ok()) << "pull " << i << ": " << r.status().ToString();
    pulled += (*r)[0].ok();
  }
  EXPECT_EQ(pulled, 1200);
  EXPECT_LT(OpenFiles(nodes_[0].process->pid()), before + 32)
      << "file descriptors grew with the spellings of one peer";
  EXPECT_TRUE(a.Ping().ok());
}

TEST_F(HostileInputTest, PullsFromAPeerThatNeverAnswersDoNotDelayLocalRequests) {
  // A "peer" that accepts connections and never replies.
  zmq::socket_t silent(ClientContext(), zmq::socket_type::router);
  silent.set(zmq::sockopt::linger, 0);
  silent.bind("tcp://127.0.0.1:*");
  const std::string silent_ep = silent.get(zmq::sockopt::last_endpoint);
  auto o = MakeObject(3, 8 << 10);
  FakeNode fake(Endpoint(), "sluggish");
  auto reg = fake.Register(silent_ep);
  ASSERT_TRUE(reg.ok() && reg->header.status == ErrorCode::kOk);
  fake.Inventory({o.key});
  WaitFor(
      [&] {
        return Locate(o.key).count({"sluggish", TierKind::kCpu}) == 1;
      },
      1s, "the silent peer located");
  // Two pulls that will wait their full 3 s on the silent peer...
  std::vector<std::future<bool>> pulls;
  for (int i = 0; i < 2; ++i) {
    pulls.push_back(std::async(std::launch::async, [&] {
      rpc::NodeClient c(nodes_[0].tcp, 5s);
      auto r = c.Pull({&o.key, 1}, silent_ep, 3s);
      return r.ok() && !(*r)[0].ok();
    }));
  }
  std::this_thread::sleep_for(200ms);
  // ...while a get of missing keys (disk lookups: a worker's job) is answered at once.
  auto missing = MakeObject(4, 8 << 10);
  rpc::NodeClient a(nodes_[0].tcp, 5s);
  const auto t0 = std::chrono::steady_clock::now();
  auto got = a.Get({&missing.key, 1});
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0].code(), ErrorCode::kNotFound);
  EXPECT_LT(took, 500ms) << "a local request waited behind pulls";
  for (auto& p : pulls) EXPECT_TRUE(p.get()) << "a pull from a silent peer is a miss";
}

// A node bound to a wildcard used to advertise it, and peers dialled
// 0.0.0.0: themselves. It advertises its host instead.
TEST_F(HostileInputTest, ANodeBoundToAWildcardAdvertisesItsHost) {
  testing::TempDir dir;
  const int port = testing::FreePort();
  auto wild =
      testing::StartNode({"--endpoint", "tcp://0.0.0.0:" + std::to_string(port), "--data-dir",
                          dir.str(), "--node-id", "node-w", "--host", "127.0.0.1", "--controller",
                          Endpoint(), "--heartbeat-interval", "200ms", "--log-level", "warn"});
  WaitFor([&] { return AliveNodes() == 4; }, 5s, "the fourth node alive");
  std::string advertised;
  const auto table = Admin(MsgType::kAdminNodes);
  for (const auto& n : table["nodes"]) {
    if (n["id"] == "node-w") advertised = n["tcp"];
  }
  EXPECT_EQ(advertised, "tcp://127.0.0.1:" + std::to_string(port));
  auto o = MakeObject(6, 8 << 10);
  rpc::NodeClient w("tcp://127.0.0.1:" + std::to_string(port), 3s);
  ASSERT_TRUE(w.Put({&o.key, 1}, {&o.bytes, 1}).ok());
  WaitFor([&] { return Locate(o.key).count({"node-w", TierKind::kCpu}) == 1; }, 5s, "located");
  rpc::NodeClient a(nodes_[0].tcp, 3s);
  auto r = a.Pull({&o.key, 1}, advertised, 2s);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE((*r)[0].ok()) << "node-a pulled from node-w at its advertised address";
}

TEST_F(HostileInputTest, ANodeNeverPullsFromItself) {
  auto o = MakeObject(5, 8 << 10);
  Put(0, o);
  WaitFor([&] { return Locate(o.key).count({"node-a", TierKind::kCpu}) == 1; }, 5s, "located");
  rpc::NodeClient a(nodes_[0].tcp, 3s);
  auto r = a.Pull({&o.key, 1}, nodes_[0].tcp, 1s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].code(), ErrorCode::kNotFound) << "the only holder is the node itself";
  auto stats = a.Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(std::get<int64_t>(stats->at("p2p.pulled_objects")), 0);
}

TEST_F(HostileInputTest, InventoriesLargerThanOneMessageConvergeAfterAControllerRestart) {
  constexpr int kObjects = 5000;  // past the 4,096 keys one message may carry
  rpc::NodeClient a(nodes_[0].tcp, 30s);
  for (int first = 0; first < kObjects; first += 500) {
    std::vector<ChunkKey> keys;
    std::vector<SharedBuffer> objects;
    for (int i = first; i < first + 500; ++i) {
      TestObject o = MakeObject(100000 + i, 1024);
      keys.push_back(o.key);
      objects.push_back(o.bytes);
    }
    auto r = a.Put(keys, objects);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  auto cpu_chunks = [&] {
    auto nodes = Admin(MsgType::kAdminNodes);
    if (nodes.is_null()) return int64_t{-1};
    for (const auto& n : nodes["nodes"]) {
      if (n["id"] == "node-a") return n["tiers"]["cpu"]["chunks"].get<int64_t>();
    }
    return int64_t{-1};
  };
  WaitFor([&] { return cpu_chunks() == kObjects; }, 10s, "events for every put applied");
  controller_.process->Signal(SIGKILL);
  controller_.process->Wait(5s);
  StartControllerProcess();  // empty registry: node-a must resend 5,000+ keys
  WaitFor([&] { return cpu_chunks() == kObjects; }, 10s, "the full inventory applied");
  // The other nodes re-register and resend their (small) inventories too, at
  // their own pace (slow under TSan): none may stay pending.
  WaitFor(
      [&] {
        auto nodes = Admin(MsgType::kAdminNodes);
        if (nodes.is_null() || nodes["nodes"].size() != 3) return false;
        for (const auto& n : nodes["nodes"]) {
          if (n["resync_pending"].get<bool>()) return false;
        }
        return true;
      },
      10s, "every node's inventory applied");
  EXPECT_EQ(cpu_chunks(), kObjects);
}

// Half-sent HTTP requests, far more than any thread pool, then a health check.
TEST_F(HostileInputTest, SlowHttpClientsDoNotDelayHealthChecks) {
  const std::string http = controller_.http;
  const int port = std::stoi(http.substr(http.rfind(':') + 1));
  auto connect_http = [&] {
    const int fd = testing::ConnectLoopback(port);
    EXPECT_GE(fd, 0);
    return fd;
  };
  std::vector<int> slow;
  for (int i = 0; i < 200; ++i) {
    slow.push_back(connect_http());
    EXPECT_GT(send(slow.back(), "GET /hea", 8, MSG_NOSIGNAL), 0);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const int fd = connect_http();
  const std::string req = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  timeval tv{3, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string answer;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) answer.append(buf, n);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  EXPECT_NE(answer.find("\"status\""), std::string::npos);
  EXPECT_LT(took, 1s);
  close(fd);
  for (int s : slow) close(s);
}

}  // namespace
}  // namespace pikv::controller
