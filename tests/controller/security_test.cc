// Security on in a real cluster (LocalCluster: a controller and nodes as
// processes, CURVE with a keyring made for them): who gets an answer, what
// each role may do, and what the wire shows of a chunk.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "fake_node.h"
#include "pikv/launch/local_cluster.h"
#include "pikv/proto/chunk_object.h"
#include "pikv/proto/endpoint.h"
#include "pikv/proto/permissions.h"
#include "pikv/rpc/admin_client.h"
#include "pikv/rpc/node_client.h"
#include "pikv/transport/rpc_client.h"
#include "test_support.h"

namespace pikv {
namespace {

using namespace std::chrono_literals;
using rpc::AdminClient;
using rpc::NodeClient;

const std::string kBinDir = std::filesystem::path(testing::BinaryPath("pikv-node")).parent_path();

class SecureClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status s = cluster_.Start({.nodes = 2, .redis = "off", .bin_dir = kBinDir});
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_FALSE(cluster_.key_dir().empty());
  }
  // `member`'s keys (admin, engine, node-<id>) to dial the controller, or
  // node `node_id`.
  CurveClientKeys Keys(const std::string& member, const std::string& node_id = "") const {
    auto security = cluster_.Security(member);
    EXPECT_TRUE(security) << member;
    return *(node_id.empty() ? security->ForController() : security->ForNode(node_id));
  }
  AdminClient Controller(std::optional<CurveClientKeys> keys) const {
    return AdminClient(cluster_.controller().endpoint, 1s, std::move(keys));
  }
  NodeClient Node(size_t i, std::optional<CurveClientKeys> keys) const {
    return NodeClient(cluster_.nodes()[i].tcp, 1s, WireLimits{}, std::move(keys));
  }

  launch::LocalCluster cluster_;
};

TEST_F(SecureClusterTest, OnlyListedKeysGetAnAnswerFromNodesAndTheController) {
  const CurveKeyPair stranger = *NewCurveKeyPair();
  const std::string controller_key = *cluster_.Security("admin")->keyring.ControllerKey();
  const std::string node_key = *cluster_.Security("admin")->keyring.NodeKey(cluster_.NodeId(0));
  EXPECT_FALSE(Controller(std::nullopt).Health().ok());
  EXPECT_FALSE(Controller(CurveClientKeys{stranger.public_key, stranger.secret_key, controller_key})
                   .Health()
                   .ok());
  EXPECT_FALSE(Node(0, std::nullopt).Ping().ok());
  EXPECT_FALSE(
      Node(0, CurveClientKeys{stranger.public_key, stranger.secret_key, node_key}).Ping().ok());
  // A client that expects another server key (a stranger at the node's
  // endpoint, as far as it can tell) gets nothing either.
  EXPECT_FALSE(Node(0, Keys("engine", cluster_.NodeId(1))).Ping().ok());

  auto health = Controller(Keys("engine")).Health();
  ASSERT_TRUE(health.ok()) << health.status().ToString();
  EXPECT_EQ(health->nodes_alive, 2u);
  EXPECT_TRUE(Node(0, Keys("engine", cluster_.NodeId(0))).Ping().ok());
}

TEST_F(SecureClusterTest, OnlyTheAdminKeyChangesWhatNodesHold) {
  const testing::TestObject o = testing::MakeObject(7, 4096);
  NodeClient engine_node = Node(0, Keys("engine", cluster_.NodeId(0)));
  auto put = engine_node.Put({&o.key, 1}, {&o.bytes, 1});  // an engine may store
  ASSERT_TRUE(put.ok() && (*put)[0].ok());

  // Straight at the node: delete, pin, clear are the admin's.
  auto del = engine_node.Delete({&o.key, 1});
  ASSERT_FALSE(del.ok());
  EXPECT_EQ(del.code(), ErrorCode::kPermissionDenied) << del.status().ToString();
  EXPECT_EQ(engine_node.Pin({&o.key, 1}).code(), ErrorCode::kPermissionDenied);
  NodeClient other_node = Node(0, Keys("node-" + cluster_.NodeId(1), cluster_.NodeId(0)));
  EXPECT_EQ(other_node.Delete({&o.key, 1}).code(), ErrorCode::kPermissionDenied);
  EXPECT_NE((*engine_node.Exists({&o.key, 1}))[0], 0);  // still held

  // Through the controller: the admin commands.
  AdminClient engine = Controller(Keys("engine"));
  for (MsgType type :
       {MsgType::kAdminClear, MsgType::kAdminEvict, MsgType::kAdminPin, MsgType::kAdminUnpin}) {
    auto r = engine.Json(type, {o.key});
    EXPECT_EQ(r.code(), ErrorCode::kPermissionDenied) << MsgTypeName(type);
  }
  EXPECT_TRUE(engine.Json(MsgType::kAdminNodes).ok());  // reading is anyone's
  EXPECT_NE((*engine_node.Exists({&o.key, 1}))[0], 0);

  auto deleted = Node(0, Keys("admin", cluster_.NodeId(0))).Delete({&o.key, 1});
  ASSERT_TRUE(deleted.ok() && (*deleted)[0].ok());
  EXPECT_EQ((*engine_node.Exists({&o.key, 1}))[0], 0);
  EXPECT_TRUE(Controller(Keys("admin")).Json(MsgType::kAdminClear).ok());
}

// Every request type (and one no server knows), under every client role's
// key, at a node and at the controller: refused (permission_denied, or
// unsupported for what that server does not answer) exactly where the
// permission table says. Whatever else comes back (an error about the empty
// request, a reply, or none for a report that gets no reply) is not a
// refusal. The request names node 0 as the sender, so a node's key speaks
// for itself and others speak for it.
TEST_F(SecureClusterTest, EveryRequestUnderEveryRoleIsRefusedExactlyWhereThePermissionTableSays) {
  const std::string self = cluster_.NodeId(0);
  struct Member {
    std::string name;
    CurvePeer peer;
  };
  const Member members[] = {{"admin", {Role::kAdmin}},
                            {"engine", {Role::kEngine}},
                            {"node-" + self, {Role::kNode, self}}};
  std::vector<MsgType> types;
  for (int t = 0; t < 100; ++t)
    if (MsgTypeName(static_cast<MsgType>(t)) != "unknown") types.push_back(static_cast<MsgType>(t));
  types.push_back(static_cast<MsgType>(999));
  size_t refused = 0, checked = 0;
  for (const Member& m : members) {
    for (Server server : {Server::kNode, Server::kController}) {
      const bool node = server == Server::kNode;
      RpcClient rpc(node ? cluster_.nodes()[0].tcp : cluster_.controller().endpoint, WireLimits{},
                    Keys(m.name, node ? self : ""));
      for (MsgType type : types) {
        Message request;
        request.header.type = type;
        request.header.fields = {{"node_id", self}};
        const ErrorCode want = Authorize(server, &m.peer, request.header).code();
        auto reply = rpc.Call(std::move(request), 300ms);
        const std::string where = m.name + " -> " + std::string(ServerName(server)) + ": " +
                                  std::string(MsgTypeName(type)) + " (" +
                                  std::to_string(static_cast<int>(type)) + ")";
        if (want != ErrorCode::kOk) {
          ASSERT_TRUE(reply.ok()) << where << ": no answer";
          EXPECT_EQ(reply->header.status, want) << where << ": " << reply->header.reason;
          ++refused;
        } else if (reply.ok()) {
          EXPECT_NE(reply->header.status, ErrorCode::kPermissionDenied) << where;
          EXPECT_NE(reply->header.status, ErrorCode::kUnsupported) << where;
        }
        ++checked;
      }
    }
  }
  // Most combinations are refusals (default deny); some are not.
  EXPECT_GT(refused, checked / 2);
  EXPECT_LT(refused, checked);
}

TEST_F(SecureClusterTest, NoKeyButANodesOwnSpeaksForThatNode) {
  const std::string victim = cluster_.NodeId(1);
  const std::string stranger_tcp = "tcp://127.0.0.1:1";
  // Another node's key and an engine's key both try to take over node 2.
  for (const std::string& member : {"node-" + cluster_.NodeId(0), std::string("engine")}) {
    testing::FakeNode impostor(cluster_.controller().endpoint, victim, Keys(member));
    auto reply = impostor.Register(stranger_tcp);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ(reply->header.status, ErrorCode::kPermissionDenied) << member;
  }
  // The controller still sends clients to the real node 2.
  const testing::TestObject o = testing::MakeObject(9, 4096);
  auto put = Node(1, Keys("engine", victim)).Put({&o.key, 1}, {&o.bytes, 1});
  ASSERT_TRUE(put.ok() && (*put)[0].ok());
  AdminClient admin = Controller(Keys("admin"));
  std::vector<std::vector<Replica>> where;
  for (auto deadline = std::chrono::steady_clock::now() + 5s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(20ms)) {
    auto located = admin.Locate({o.key});
    ASSERT_TRUE(located.ok());
    where = *located;
    if (!where[0].empty()) break;
  }
  ASSERT_FALSE(where[0].empty());
  for (const Replica& r : where[0]) {  // its CPU and disk copies
    EXPECT_EQ(r.node_id, victim);
    EXPECT_EQ(r.tcp, cluster_.nodes()[1].tcp);
  }
  EXPECT_EQ(Controller(Keys("admin")).Health()->nodes_alive, 2u);
}

TEST_F(SecureClusterTest, ABigChunkStreamsBetweenNodesOverCurveByteForByte) {
  // 8 MiB: the puller asks its peer for 1 MiB frames, each one encrypted.
  const testing::TestObject o = testing::MakeObject(11, 8 << 20);
  auto put = Node(1, Keys("engine", cluster_.NodeId(1))).Put({&o.key, 1}, {&o.bytes, 1});
  ASSERT_TRUE(put.ok() && (*put)[0].ok()) << put.status().ToString();
  AdminClient admin = Controller(Keys("admin"));
  for (auto deadline = std::chrono::steady_clock::now() + 5s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(20ms)) {
    auto located = admin.Locate({o.key});
    if (located.ok() && !(*located)[0].empty()) break;
  }
  NodeClient node =
      NodeClient(cluster_.nodes()[0].tcp, 10s, WireLimits{}, Keys("engine", cluster_.NodeId(0)));
  auto pulled = node.Pull({&o.key, 1}, cluster_.nodes()[1].tcp, 5s);
  ASSERT_TRUE(pulled.ok() && (*pulled)[0].ok()) << pulled.status().ToString();
  const SharedBuffer& got = *(*pulled)[0];
  ASSERT_EQ(got.size(), o.bytes.size());
  // The node that took the put recorded its writer (the keyring's unnamed
  // engine, "engine"), and the pull kept it; every other byte is the put's.
  std::vector<uint8_t> want(o.bytes.data(), o.bytes.data() + o.bytes.size());
  ASSERT_TRUE(StampWriter(want, "engine").ok());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0);
  EXPECT_EQ(ReadOwner(got.span()), (Owner{"", "engine"}));
  auto stats = node.Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(FieldInt(*stats, "p2p.pulled_streamed"), 1);
}

// A loopback tcp relay that records every byte it forwards, both ways: what
// a capture of the wire between a client and a node would show.
class RecordingRelay {
 public:
  explicit RecordingRelay(const std::string& target) {
    auto ep = ParseTcpEndpoint(target);
    target_port_ = ep.ok() ? ep->port : 0;
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(listener_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(listener_, 8) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      ADD_FAILURE() << "relay: cannot listen";
    endpoint_ = "tcp://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    thread_ = std::thread([this] { Run(); });
  }
  ~RecordingRelay() {
    stop_ = true;
    thread_.join();
    close(listener_);
  }
  const std::string& endpoint() const { return endpoint_; }
  std::string captured() {
    std::lock_guard lock(mu_);
    return captured_;
  }

 private:
  int Dial() const {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(target_port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close(fd);
      return -1;
    }
    return fd;
  }
  void Run() {
    std::vector<pollfd> fds = {{listener_, POLLIN, 0}};  // then pairs: client, node
    std::vector<char> buf(1 << 16);
    while (!stop_) {
      if (poll(fds.data(), fds.size(), 20) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        const int client = accept(listener_, nullptr, nullptr);
        const int node = client >= 0 ? Dial() : -1;
        if (node >= 0) {
          fds.push_back({client, POLLIN, 0});
          fds.push_back({node, POLLIN, 0});
        } else if (client >= 0) {
          close(client);
        }
      }
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const size_t peer = i % 2 == 1 ? i + 1 : i - 1;
        const ssize_t n = read(fds[i].fd, buf.data(), buf.size());
        if (n > 0) {  // recorded before it is passed on: what arrived was captured
          std::lock_guard lock(mu_);
          captured_.append(buf.data(), size_t(n));
        }
        if (n <= 0 || fds[peer].fd < 0 || !WriteAll(fds[peer].fd, buf.data(), size_t(n))) {
          for (size_t j : {i, peer}) {
            if (fds[j].fd >= 0) close(fds[j].fd);
            fds[j].fd = -1;
          }
        }
      }
    }
    for (size_t i = 1; i < fds.size(); ++i)
      if (fds[i].fd >= 0) close(fds[i].fd);
  }
  static bool WriteAll(int fd, const char* p, size_t n) {
    while (n > 0) {
      const ssize_t w = write(fd, p, n);
      if (w <= 0) return false;
      p += w;
      n -= size_t(w);
    }
    return true;
  }

  int listener_ = -1;
  int target_port_ = 0;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string captured_;  // guarded by mu_
  std::thread thread_;
};

// The object's first 16 token ids as they are laid out in it (int32 LE).
std::string TokenBytes(const SharedBuffer& object) {
  auto header = ParseChunkHeader({object.data(), object.size()});
  EXPECT_TRUE(header.ok());
  std::string bytes(reinterpret_cast<const char*>(header->tokens.data()),
                    std::min<size_t>(16, header->tokens.size()) * sizeof(int32_t));
  return bytes;
}

class WireCaptureTest : public ::testing::TestWithParam<bool> {};

TEST_P(WireCaptureTest, TokenIdsCrossTheWireInTheClearOnlyWhenSecurityIsOff) {
  const bool secure = GetParam();
  launch::LocalCluster cluster;
  ASSERT_TRUE(
      cluster.Start({.nodes = 1, .redis = "off", .bin_dir = kBinDir, .secure = secure}).ok());
  RecordingRelay relay(cluster.nodes()[0].tcp);
  std::optional<CurveClientKeys> keys;
  if (secure) keys = *cluster.Security("engine")->ForNode(cluster.NodeId(0));
  NodeClient node(relay.endpoint(), 5s, WireLimits{}, keys);
  const testing::TestObject o = testing::MakeObject(424242, 64 << 10);
  auto put = node.Put({&o.key, 1}, {&o.bytes, 1});
  ASSERT_TRUE(put.ok() && (*put)[0].ok()) << put.status().ToString();
  auto got = node.Get({&o.key, 1});
  ASSERT_TRUE(got.ok() && (*got)[0].ok());
  EXPECT_EQ((*got)[0]->size(), o.bytes.size());

  const std::string wire = relay.captured();
  EXPECT_GT(wire.size(), 2 * o.bytes.size());  // the put and the get went through it
  const std::string tokens = TokenBytes(o.bytes);
  const std::string kv(reinterpret_cast<const char*>(o.bytes.data()) + o.bytes.size() - 64, 64);
  EXPECT_EQ(wire.find(tokens) != std::string::npos, !secure);
  EXPECT_EQ(wire.find(kv) != std::string::npos, !secure);
}

INSTANTIATE_TEST_SUITE_P(SecurityOnAndOff, WireCaptureTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Secure" : "Insecure"; });

}  // namespace
}  // namespace pikv
