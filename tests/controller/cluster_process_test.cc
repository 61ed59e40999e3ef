// A real controller and three real pikv-node processes: registration, event
// reporting, node death and return, controller crash and recovery, admin
// operations through the real CLI, and garbage on the controller's port.
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <zmq.hpp>

#include "cluster_fixture.h"
#include "pikv/rpc/admin_client.h"
#include "pikv/rpc/node_client.h"
#include "pikv/transport/zmq_frames.h"
#include "test_support.h"

namespace pikv::controller {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using rpc::NodeClient;
using testing::ChildProcess;
using testing::MakeObject;
using testing::TempDir;
using testing::TestObject;

// Every test runs twice: security off, and on (the admin's keys).
class ClusterProcessTest : public ClusterTest, public ::testing::WithParamInterface<bool> {
 protected:
  ClusterProcessTest() { secure_ = GetParam(); }
};

TEST_P(ClusterProcessTest, APutChunkIsLocatedWithinOneSecond) {
  auto o = MakeObject(1, 64 << 10);
  Put(0, o);
  auto took = WaitFor(
      [&] {
        return Locate(o.key).count({"node-a", TierKind::kCpu}) == 1;
      },
      5s, "locate");
  EXPECT_LT(took, 1000ms);
  WaitFor(
      [&] {
        return Locate(o.key) == Where{{"node-a", TierKind::kCpu}, {"node-a", TierKind::kDisk}};
      },
      5s, "the disk copy too");
}

// /score over HTTP and `pikv admin score` over the wire answer what the
// registry holds: each chunk in the cheapest reach each node has, a killed
// node's chunks counting for no one.
TEST_P(ClusterProcessTest, ScoreAnswersWhatTheRegistryHoldsOverHttpAndTheCli) {
  const TestObject on_a = MakeObject(60, 16 << 10), on_b = MakeObject(61, 16 << 10),
                   on_c = MakeObject(62, 16 << 10);
  Put(0, on_a);
  Put(1, on_b);
  Put(2, on_c);
  WaitFor(
      [&] {
        return Locate(on_a.key).size() == 2 && Locate(on_b.key).size() == 2 &&
               Locate(on_c.key).size() == 2;
      },
      5s, "cpu and disk copies located");
  nodes_[2].process->Signal(SIGKILL);
  WaitFor([&] { return Locate(on_c.key).empty(); }, 10s, "node-c's chunks to go");

  const std::string keys = on_a.key.Hex() + "," + on_b.key.Hex() + "," + on_c.key.Hex();
  const auto [status, body] =
      testing::HttpGet(controller_.http, "/score?key=" + keys + "&tokens=100,200,300");
  ASSERT_EQ(status, 200) << body;
  const json doc = json::parse(body);
  EXPECT_EQ(doc["keys"], 3);
  EXPECT_EQ(doc["tokens"], 600);
  std::map<std::string, json> tokens;
  for (const auto& n : doc["nodes"]) tokens[n["id"]] = n["tokens"];
  ASSERT_EQ(tokens.size(), 2u) << "node-c is dead: " << body;
  EXPECT_EQ(tokens["node-a"],
            (json{{"cpu", 100}, {"disk", 0}, {"remote", 0}, {"peer", 200}, {"missing", 300}}));
  EXPECT_EQ(tokens["node-b"],
            (json{{"cpu", 200}, {"disk", 0}, {"remote", 0}, {"peer", 100}, {"missing", 300}}));
  EXPECT_EQ(testing::HttpGet(controller_.http, "/score?key=" + keys + "&tokens=1,0,1").first, 400);
  EXPECT_EQ(testing::HttpGet(controller_.http, "/score?key=" + keys + "&tokens=1").first, 400);
  EXPECT_EQ(testing::HttpGet(controller_.http, "/score?key=zz").first, 400);
  EXPECT_EQ(testing::HttpGet(controller_.http, "/score?key=" + keys + "&tenant=a/b").first, 400);

  const auto [code, out] = Cli(
      {"score", on_a.key.Hex(), on_b.key.Hex(), "--chunk-tokens", "100,200", "--nodes", "node-b"});
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("2 chunks, 300 tokens"), std::string::npos) << out;
  EXPECT_NE(out.find("node-b"), std::string::npos) << out;
  EXPECT_EQ(out.find("node-a"), std::string::npos) << out;
}

TEST_P(ClusterProcessTest, AKilledNodeVanishesAndReturnsWithANewIncarnationAndItsDisk) {
  std::vector<TestObject> objs;
  for (int i = 0; i < 5; ++i) {
    objs.push_back(MakeObject(10 + i, 16 << 10));
    Put(1, objs.back());
  }
  WaitFor(
      [&] {
        return Locate(objs.back().key).count({"node-b", TierKind::kDisk}) == 1;
      },
      5s, "node-b's disk copy");
  auto incarnation = [&] {
    const json all = Admin(MsgType::kAdminNodes);  // keep it alive for the loop
    if (all.is_null()) return std::make_pair(std::string(), std::string());
    for (const auto& n : all["nodes"]) {
      if (n["id"] == "node-b")
        return std::make_pair(n["incarnation"].get<std::string>(), n["state"].get<std::string>());
    }
    return std::make_pair(std::string(), std::string());
  };
  const std::string first = incarnation().first;
  nodes_[1].process->Signal(SIGKILL);
  auto gone = WaitFor([&] { return Locate(objs[0].key).empty(); }, 10s, "node-b's entries to go");
  EXPECT_LE(gone, kDeadAfter + 1000ms);
  EXPECT_EQ(incarnation().second, "dead");

  StartNodeProcess(1);  // same data dir: the disk tier survived
  WaitFor([&] { return incarnation().second == "alive"; }, 5s, "node-b alive again");
  EXPECT_NE(incarnation().first, first);
  for (const auto& o : objs) {
    WaitFor(
        [&] {
          return Locate(o.key) == Where{{"node-b", TierKind::kDisk}};
        },
        5s, "node-b's disk inventory");
  }
}

TEST_P(ClusterProcessTest, ARestartedControllerAnswersLocateAsBeforeTheCrash) {
  std::vector<TestObject> objs;
  for (int i = 0; i < 6; ++i) {
    objs.push_back(MakeObject(20 + i, 16 << 10));
    Put(i % 3, objs.back());
  }
  for (const auto& o : objs) {
    WaitFor([&] { return Locate(o.key).size() == 2; }, 5s, "cpu and disk copies located");
  }
  std::vector<Where> before;
  for (const auto& o : objs) before.push_back(Locate(o.key));
  controller_.process->Signal(SIGKILL);
  controller_.process->Wait(5s);
  StartControllerProcess();  // empty registry, new epoch
  auto took = WaitFor(
      [&] {
        for (size_t i = 0; i < objs.size(); ++i) {
          if (Locate(objs[i].key) != before[i]) return false;
        }
        return true;
      },
      10s, "locate to match the pre-crash answers");
  EXPECT_LT(took, 3000ms) << "more than a few heartbeat intervals (200 ms) plus jitter (<= 500 ms)";
  EXPECT_EQ(AliveNodes(), 3);
}

TEST_P(ClusterProcessTest, ClearPinAndEvictTakeEffectOnTheNodes) {
  auto shared = MakeObject(30, 8 << 10), only_c = MakeObject(31, 8 << 10);
  Put(0, shared);
  Put(1, shared);
  Put(2, only_c);
  WaitFor([&] { return Locate(shared.key).size() == 4 && Locate(only_c.key).size() == 2; }, 5s,
          "located");

  ASSERT_FALSE(Admin(MsgType::kAdminPin, {shared.key}).is_null());
  // A pinned object can be unpinned once per pin: the node says so.
  NodeClient a = Node(0), b = Node(1), c = Node(2);
  WaitFor(
      [&] {
        return (*a.Unpin({&shared.key, 1}))[0].ok();
      },
      3s, "node-a pinned by the controller");
  WaitFor(
      [&] {
        return (*b.Unpin({&shared.key, 1}))[0].ok();
      },
      3s, "node-b pinned by the controller");

  ASSERT_FALSE(Admin(MsgType::kAdminEvict, {shared.key}).is_null());
  WaitFor(
      [&] {
        return (*a.Exists({&shared.key, 1}))[0] == 0 && (*b.Exists({&shared.key, 1}))[0] == 0;
      },
      3s, "evicted on the nodes");
  WaitFor([&] { return Locate(shared.key).empty(); }, 3s, "evict reported to the registry");

  json cleared = Admin(MsgType::kAdminClear, {}, {.node = "node-c"});
  ASSERT_EQ(cleared["forwarded_to"], json::array({"node-c"}));
  WaitFor([&] { return (*c.Exists({&only_c.key, 1}))[0] == 0; }, 3s, "node-c cleared");
  WaitFor([&] { return Locate(only_c.key).empty(); }, 3s, "clear reported to the registry");
}

TEST_P(ClusterProcessTest, EveryAdminCommandThroughTheCliAsTableAndJson) {
  auto o = MakeObject(40, 8 << 10);
  Put(0, o);
  WaitFor([&] { return Locate(o.key).size() == 2; }, 5s, "located");
  const std::string hex = o.key.Hex();

  auto [code, out] = Cli({"nodes"});
  EXPECT_EQ(code, 0);
  for (int i = 0; i < 3; ++i) EXPECT_NE(out.find(Id(i)), std::string::npos) << out;
  std::tie(code, out) = Cli({"nodes", "--json"});
  EXPECT_EQ(json::parse(out)["nodes"].size(), 3u);

  std::tie(code, out) = Cli({"stats"});
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("3 alive"), std::string::npos) << out;
  std::tie(code, out) = Cli({"stats", "--json"});
  json stats = json::parse(out);
  EXPECT_EQ(stats["keys"], 1);
  EXPECT_EQ(stats["tiers"]["cpu"]["chunks"], 1);

  std::tie(code, out) = Cli({"health"});
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("status: ok"), std::string::npos);
  std::tie(code, out) = Cli({"health", "--json"});
  EXPECT_EQ(json::parse(out)["status"], "ok");

  std::tie(code, out) = Cli({"locate", hex});
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("node-a"), std::string::npos) << out;
  std::tie(code, out) = Cli({"locate", hex, "--json"});
  EXPECT_EQ(json::parse(out)["keys"][0]["locations"].size(), 2u);
  // By token ids: the test objects' namespace and tokens give the same key.
  std::string tokens;
  for (int t = 0; t < 8; ++t) tokens += (t ? "," : "") + std::to_string(40 * 7919 + t);
  std::tie(code, out) = Cli({"locate", "--tokens", tokens, "--model", "test-model", "--dtype",
                             "f32", "--rope", "neox;rotary_dim=128;theta=10000", "--json"});
  EXPECT_EQ(json::parse(out)["keys"][0]["key"], hex) << out;

  for (const char* op : {"pin", "unpin"}) {
    std::tie(code, out) = Cli({op, hex});
    EXPECT_EQ(code, 0);
    EXPECT_NE(out.find("sent to 3 node(s)"), std::string::npos) << op << ": " << out;
    std::tie(code, out) = Cli({op, hex, "--json"});
    EXPECT_EQ(json::parse(out)["forwarded_to"].size(), 3u);
  }
  std::tie(code, out) = Cli({"evict", hex, "--json"});
  EXPECT_EQ(json::parse(out)["keys"], 1);
  WaitFor([&] { return Locate(o.key).empty(); }, 3s, "evicted");
  std::tie(code, out) = Cli({"clear"});
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("sent to 3 node(s)"), std::string::npos);
  std::tie(code, out) = Cli({"clear", "--node", "node-b", "--json"});
  EXPECT_EQ(json::parse(out)["forwarded_to"], json::array({"node-b"}));
  std::tie(code, out) = Cli({"clear", "--node", "no-such-node"});
  EXPECT_EQ(code, 1);

  std::tie(code, out) = Cli({"locate", "not-a-key"});
  EXPECT_EQ(code, 2);
  controller_.process->Signal(SIGKILL);
  controller_.process->Wait(5s);
  auto t0 = std::chrono::steady_clock::now();
  std::tie(code, out) = Cli({"nodes", "--timeout", "300ms"});
  EXPECT_EQ(code, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
}

TEST_P(ClusterProcessTest, GarbageGetsErrorRepliesAndChangesNothing) {
  auto o = MakeObject(50, 8 << 10);
  Put(0, o);
  WaitFor([&] { return Locate(o.key).size() == 2; }, 5s, "located");
  const Where before = Locate(o.key);
  zmq::socket_t s(ClientContext(), zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::rcvtimeo, 3000);
  if (auto keys = AdminKeys()) DialCurve(s.handle(), *keys);  // garbage from a listed key
  s.connect(Endpoint());
  Header unknown;
  unknown.type = static_cast<MsgType>(777);
  Header with_payload;
  with_payload.type = MsgType::kAdminNodes;
  Header forged;  // events for a node that never registered
  forged.type = MsgType::kEvents;
  forged.keys = {o.key};
  forged.values = {EncodeEvent(TierKind::kCpu, false)};
  forged.fields = {
      {"node_id", std::string("node-a")}, {"incarnation", int64_t{1}}, {"seq", int64_t{1}}};
  const std::vector<std::pair<std::vector<std::string>, bool>> cases = {
      {{"\xc1 not msgpack"}, true},    {{""}, true},
      {{EncodeHeader(unknown)}, true}, {{EncodeHeader(with_payload), "payload"}, true},
      {{EncodeHeader(forged)}, false},  // events get no reply, and a wrong incarnation changes
                                        // nothing
  };
  for (const auto& [frames, replies] : cases) {
    for (size_t i = 0; i < frames.size(); ++i) {
      s.send(zmq::buffer(frames[i]),
             i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
    if (!replies) continue;
    std::vector<zmq::message_t> reply;
    ASSERT_TRUE(RecvFrames(s, reply));
    auto h = DecodeHeader({static_cast<const uint8_t*>(reply[0].data()), reply[0].size()});
    ASSERT_TRUE(h.ok());
    EXPECT_NE(h->status, ErrorCode::kOk);
    EXPECT_FALSE(h->reason.empty());
  }
  EXPECT_EQ(Locate(o.key), before);
  EXPECT_EQ(AliveNodes(), 3);
}

INSTANTIATE_TEST_SUITE_P(SecurityOffAndOn, ClusterProcessTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Secure" : "Insecure"; });

}  // namespace
}  // namespace pikv::controller
