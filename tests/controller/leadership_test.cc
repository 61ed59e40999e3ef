// Standby controllers on a real 3-member etcd cluster: one leads, the others
// redirect; the leader killed, paused or left without etcd members; all
// controllers killed and one brought back; nodes and clients following the
// leader by etcd:// and by a list. Real processes throughout.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "cluster_queries.h"
#include "pikv/controller/controller_handler.h"
#include "pikv/controller/leader_election.h"
#include "pikv/coord/etcd_client.h"
#include "pikv/coord/find_controllers.h"
#include "pikv/coord/leader_key.h"
#include "pikv/launch/etcd.h"
#include "pikv/rpc/admin_client.h"
#include "pikv/rpc/node_client.h"
#include "pikv/transport/rpc_client.h"
#include "pikv/transport/zmq_frames.h"
#include "test_support.h"

namespace pikv::controller {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using rpc::AdminClient;
using rpc::NodeClient;
using Clock = std::chrono::steady_clock;

constexpr int kControllers = 3;
constexpr int kNodes = 2;
constexpr auto kTtl = 2s;

template <typename Cond>
bool WaitFor(Cond cond, std::chrono::milliseconds limit) {
  const auto until = Clock::now() + limit;
  while (!cond()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

class LeadershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!launch::EtcdCluster::Available()) GTEST_SKIP() << "etcd is not installed";
    if (secure_) {
      keys_.emplace(std::vector<std::string>{NodeId(0), NodeId(1)});
      for (const char* engine : {"honest", "bad"}) keys_->AddEngine(engine, "acme");
    }
    ASSERT_TRUE(etcd_.Start().ok());
    for (int i = 0; i < kControllers; ++i) {
      ports_[i] = testing::FreePort();
      StartControllerProcess(i);
    }
    ASSERT_TRUE(WaitFor([&] { return LeaderIndex() >= 0; }, 10s)) << "no leader elected";
    for (int i = 0; i < kNodes; ++i) {
      nodes_[i] = testing::StartNode(
          testing::WithKeys(keys_, "node-" + NodeId(i),
                            {"--endpoint", "tcp://127.0.0.1:*", "--data-dir", dirs_[i].str(),
                             "--node-id", NodeId(i), "--host", "host-" + NodeId(i), "--controller",
                             Spec(), "--heartbeat-interval", "200ms", "--log-level", "warn"}));
    }
    for (int i = 0; i < kNodes; ++i) {
      for (int k = 0; k < 4; ++k) {
        objects_[i].push_back(testing::MakeObject(100 * i + k, 4096));
        NodeClient c(nodes_[i].tcp, 5s, WireLimits{}, testing::DialKeys(keys_, "admin", NodeId(i)));
        auto r = c.Put({&objects_[i].back().key, 1}, {&objects_[i].back().bytes, 1});
        ASSERT_TRUE(r.ok() && (*r)[0].ok());
      }
    }
    ASSERT_TRUE(WaitFor([&] { return RegistryWhole(); }, 10s)) << "registry never whole";
  }

  void StartControllerProcess(int i) {
    std::vector<std::string> args = {"--endpoint",   Endpoint(i), "--http",          "127.0.0.1:0",
                                     "--lease-ttl",  lease_ttl_,  "--suspect-after", "600ms",
                                     "--dead-after", "1500ms",    "--log-level",     "warn"};
    for (const auto& a : etcd_.ControllerArgs()) args.push_back(a);
    controllers_[i] = testing::StartController(testing::WithKeys(keys_, "controller", args));
  }
  std::string Endpoint(int i) const { return "tcp://127.0.0.1:" + std::to_string(ports_[i]); }
  std::string Spec() const { return etcd_.Spec(); }
  std::string List() const {
    std::string out;
    for (int i = 0; i < kControllers; ++i) out += (i ? "," : "") + Endpoint(i);
    return out;
  }
  static std::string NodeId(int i) { return "node-" + std::string(1, static_cast<char>('a' + i)); }
  std::optional<CurveClientKeys> AdminKeys() const { return testing::DialKeys(keys_, "admin"); }

  // Controller i's own health document (no redirect followed); empty when
  // it does not answer.
  json Health(int i) const {
    RpcClient rpc(Endpoint(i), {}, AdminKeys());
    Message req;
    req.header.type = MsgType::kAdminHealth;
    auto reply = rpc.Call(std::move(req), 500ms);
    if (!reply.ok()) return json::object();
    if (reply->header.status == ErrorCode::kNotLeader)
      return json{{"role", "standby"}, {"leader", DecodeNotLeader(reply->header).leader}};
    if (reply->header.status != ErrorCode::kOk || reply->payloads.size() != 1)
      return json::object();
    const auto& doc = reply->payloads[0];
    return json::parse(std::string(reinterpret_cast<const char*>(doc.data()), doc.size()));
  }
  int LeaderIndex() const {
    for (int i = 0; i < kControllers; ++i) {
      if (controllers_[i].process && Health(i).value("role", "") == "leader") return i;
    }
    return -1;
  }
  // The leader, waiting up to `limit` for one to answer health as leader: a
  // loaded machine (the sanitizers, ctest's heaviest tests beside these) can
  // miss one 500 ms health call to a live leader.
  int WaitLeader(std::chrono::milliseconds limit = 5s) const {
    int leader = -1;
    WaitFor([&] { return (leader = LeaderIndex()) >= 0; }, limit);
    return leader;
  }
  // Controller i's epoch; 0 when it does not answer within `limit`.
  int64_t Epoch(int i, std::chrono::milliseconds limit = 5s) const {
    std::string epoch;
    WaitFor([&] { return !(epoch = Health(i).value("epoch", "")).empty(); }, limit);
    return epoch.empty() ? 0 : std::stoll(epoch);
  }

  // Every object is located on exactly the node that holds it, and nowhere
  // else; counts locations that name a node not holding the key.
  bool RegistryWhole(AdminClient* admin = nullptr, uint64_t* wrong = nullptr) {
    AdminClient own(coord::FindControllers(Spec()), 1s, AdminKeys());
    if (!admin) admin = &own;
    bool whole = true;
    for (int i = 0; i < kNodes; ++i) {
      std::vector<ChunkKey> keys;
      for (const auto& o : objects_[i]) keys.push_back(o.key);
      auto located = admin->Locate(keys);
      if (!located.ok()) return false;
      for (const auto& copies : *located) {
        std::set<std::string> at;
        for (const auto& c : copies) {
          if (c.location.tier == TierKind::kRemote) continue;
          at.insert(c.node_id);
          if (c.node_id != NodeId(i) && wrong) ++*wrong;
        }
        whole = whole && at == std::set<std::string>{NodeId(i)};
      }
    }
    return whole;
  }

  // Kills or stops the leader with `sig`; returns how long locate went
  // unanswered and how long until the registry was whole again, counting
  // wrong locations served meanwhile.
  struct Failover {
    std::chrono::milliseconds silent{0}, whole{0};
    uint64_t wrong = 0;
    int old_leader = -1;
  };
  Failover Fail(int sig) {
    Failover f;
    f.old_leader = WaitLeader();
    EXPECT_GE(f.old_leader, 0);
    AdminClient admin(coord::FindControllers(Spec()), 200ms, AdminKeys());
    EXPECT_TRUE(RegistryWhole(&admin));
    const auto t0 = Clock::now();
    controllers_[f.old_leader].process->Signal(sig);
    std::optional<Clock::time_point> answered;
    while (Clock::now() - t0 < 15s) {
      const bool whole = RegistryWhole(&admin, &f.wrong);
      if (!answered) {
        std::vector<ChunkKey> one{objects_[0][0].key};
        if (admin.Locate(one).ok()) answered = Clock::now();
      }
      // A new leader, not a moment when none answers health as leader.
      const int leader = whole && answered ? LeaderIndex() : -1;
      if (leader >= 0 && leader != f.old_leader) break;
      std::this_thread::sleep_for(20ms);
    }
    using std::chrono::duration_cast;
    EXPECT_TRUE(answered.has_value());
    if (answered) f.silent = duration_cast<std::chrono::milliseconds>(*answered - t0);
    f.whole = duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
    return f;
  }

  bool secure_ = false;
  std::string lease_ttl_ = "2s";
  std::optional<testing::TestKeys> keys_;
  launch::EtcdCluster etcd_{3};
  int ports_[kControllers] = {};
  testing::ControllerProcess controllers_[kControllers];
  testing::TempDir dirs_[kNodes];
  testing::NodeProcess nodes_[kNodes];
  std::vector<testing::TestObject> objects_[kNodes];
};

TEST_F(LeadershipTest, OneLeadsAndStandbysNameIt) {
  const int leader = WaitLeader();
  ASSERT_GE(leader, 0);
  int standbys = 0;
  for (int i = 0; i < kControllers; ++i) {
    if (i == leader) continue;
    const json h = Health(i);
    EXPECT_EQ(h.value("role", ""), "standby");
    EXPECT_EQ(h.value("leader", ""), Endpoint(leader));
    ++standbys;
  }
  EXPECT_EQ(standbys, kControllers - 1);
  // The leader's health names its standbys and lease; its epoch is the
  // etcd key's create revision.
  EXPECT_TRUE(WaitFor([&] { return Health(leader)["standbys"].size() == 2; }, 3s));
  const json h = Health(leader);
  EXPECT_EQ(h["lease_ttl_ms"], 2000);
  coord::EtcdClient etcd(etcd_.access(), 1s);
  auto key = etcd.Get(coord::LeaderKey("pikv"));
  ASSERT_TRUE(key.ok() && key->has_value());
  EXPECT_EQ(h["epoch"], std::to_string((*key)->create_revision));
  // Every spec finds the leader: a standby's single endpoint, the list.
  for (const std::string& spec : {Endpoint((leader + 1) % kControllers), List(), Spec()}) {
    AdminClient admin(coord::FindControllers(spec), 1s, AdminKeys());
    auto health = admin.Health();
    ASSERT_TRUE(health.ok()) << spec << ": " << health.status().ToString();
    EXPECT_EQ(health->nodes_alive, 2u) << spec;
  }
}

TEST_F(LeadershipTest, KilledLeaderIsReplacedWithTheRegistryWhole) {
  const int64_t old_epoch = Epoch(WaitLeader());
  ASSERT_GT(old_epoch, 0);
  const Failover f = Fail(SIGKILL);
  EXPECT_EQ(f.wrong, 0u);
  // Locate is back within the lease plus a second, the registry soon after.
  EXPECT_LT(f.silent, kTtl + 1500ms);
  EXPECT_LT(f.whole, f.silent + 3s);
  const int leader = WaitLeader();
  ASSERT_GE(leader, 0);
  EXPECT_NE(leader, f.old_leader);
  EXPECT_GT(Epoch(leader), old_epoch);
  EXPECT_EQ(testing::AliveNodes(Spec(), AdminKeys()), kNodes);
}

// P2P pulls while no controller answers: where it last said, or the peers
// it last named; what arrives is verified as always.
TEST_F(LeadershipTest, PullsWithNoControllerUseTheLastLocationsSeen) {
  NodeClient a(nodes_[0].tcp, 5s);
  const testing::TestObject& known = objects_[1][0];
  const testing::TestObject& never_located = objects_[1][1];
  auto first = a.Pull({&known.key, 1}, "", 3s);  // located: remembered
  ASSERT_TRUE(first.ok() && (*first)[0].ok());
  ASSERT_TRUE(a.Delete({&known.key, 1}).ok());  // so the next pull must fetch again
  for (auto& c : controllers_) {
    if (c.process) c.process->Signal(SIGKILL);
  }
  for (const testing::TestObject* o : {&known, &never_located}) {
    auto pulled = a.Pull({&o->key, 1}, "", 2s);
    ASSERT_TRUE(pulled.ok()) << pulled.status().ToString();
    ASSERT_TRUE((*pulled)[0].ok()) << "no pull without a controller";
    const SharedBuffer& got = *(*pulled)[0];
    EXPECT_TRUE(got.size() == o->bytes.size() &&
                std::equal(got.data(), got.data() + got.size(), o->bytes.data()));
  }
}

TEST_F(LeadershipTest, PausedLeaderLosesItsLeaseAndStaysDeposed) {
  const Failover f = Fail(SIGSTOP);
  EXPECT_EQ(f.wrong, 0u);
  EXPECT_LT(f.silent, kTtl + 1500ms);
  const int leader = WaitLeader();
  ASSERT_GE(leader, 0);
  controllers_[f.old_leader].process->Signal(SIGCONT);
  // Woken past its lease, it answers as a standby naming the new leader.
  ASSERT_TRUE(WaitFor(
      [&] {
        const json h = Health(f.old_leader);
        return h.value("role", "") == "standby" && h.value("leader", "") == Endpoint(leader);
      },
      5s));
  // The nodes stay with the new leader; an admin command reaches them.
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(WaitLeader(), leader);
  EXPECT_TRUE(RegistryWhole());
  AdminClient admin(coord::FindControllers(Spec()), 2s, AdminKeys());
  ASSERT_TRUE(admin.Json(MsgType::kAdminEvict, {objects_[0][0].key}).ok());
  EXPECT_TRUE(WaitFor(
      [&] { return testing::Holders(Spec(), objects_[0][0].key, AdminKeys()).empty(); }, 5s));
}

// A lease of 4 s: twice etcd's election timeout plus room for a loaded
// machine (under the sanitizers an etcd election took past a 2 s lease).
class EtcdMemberLossTest : public LeadershipTest {
 protected:
  void SetUp() override {
    lease_ttl_ = "4s";
    LeadershipTest::SetUp();
  }
};

TEST_F(EtcdMemberLossTest, LosingEtcdMembersOneAtATimeKeepsTheLeader) {
  const int leader = WaitLeader();
  const int64_t epoch = Epoch(leader);
  for (int m = 0; m < 3; ++m) {
    etcd_.Kill(m);
    std::this_thread::sleep_for(4500ms);  // past an etcd election and a lease TTL
    EXPECT_EQ(WaitLeader(), leader) << "etcd member " << m << " down";
    EXPECT_EQ(Epoch(leader), epoch) << "etcd member " << m << " down";
    EXPECT_TRUE(RegistryWhole()) << "etcd member " << m << " down";
    ASSERT_TRUE(etcd_.StartMember(m).ok());
    std::this_thread::sleep_for(1s);
  }
}

// etcd wiped: its revisions, so the epochs, start again from 1. Nodes that
// saw a higher epoch must not ignore the new leader forever.
TEST_F(LeadershipTest, AWipedEtcdDoesNotStrandTheNodes) {
  coord::EtcdClient etcd(etcd_.access(), 1s);
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(etcd.Put("pikv-test/filler", std::to_string(i), 0).ok());
  Fail(SIGKILL);  // a leadership elected past revision 40
  const int leader = WaitLeader();
  ASSERT_GE(leader, 0);
  const int64_t before = Epoch(leader);
  ASSERT_GT(before, 40);
  // Only the leader left: it wins again on the wiped etcd, at the endpoint
  // the nodes are registered with, under a lower epoch.
  for (int i = 0; i < kControllers; ++i) {
    if (i != leader && controllers_[i].process) controllers_[i].process->Signal(SIGKILL);
  }
  ASSERT_TRUE(etcd_.Wipe().ok());
  auto lower_epoch_leads = [&] {
    const int l = LeaderIndex();
    const int64_t e = l >= 0 ? Epoch(l, 0ms) : 0;
    return e > 0 && e < before;
  };
  ASSERT_TRUE(WaitFor(lower_epoch_leads, 30s)) << "no leader elected on the wiped etcd";
  // Two lease TTLs (2 s each) of the lower claim, then the nodes follow
  // (in about 6 s; the margin is for a loaded machine).
  EXPECT_TRUE(WaitFor([&] { return RegistryWhole(); }, 40s))
      << "the nodes never followed the leader of the wiped etcd";
}

TEST_F(LeadershipTest, AllControllersDownThenOneBack) {
  for (auto& c : controllers_) c.process->Signal(SIGKILL);
  for (auto& c : controllers_) {
    c.process->Wait(5s);
    c.process.reset();
  }
  std::this_thread::sleep_for(kTtl + 500ms);  // every lease gone
  EXPECT_FALSE(AdminClient(coord::FindControllers(Spec()), 300ms, AdminKeys()).Health().ok());
  StartControllerProcess(1);
  EXPECT_TRUE(WaitFor([&] { return LeaderIndex() == 1; }, 5s));
  EXPECT_TRUE(WaitFor([&] { return RegistryWhole(); }, 5s));
}

TEST_F(LeadershipTest, ListFindsTheLeaderPastADeadController) {
  const int leader = WaitLeader();
  ASSERT_GE(leader, 0);
  const int dead = (leader + 1) % kControllers;
  controllers_[dead].process->Signal(SIGKILL);
  // A spec listing the dead one first: each call still answers in time.
  const std::string spec = Endpoint(dead) + "," + Endpoint((dead + 1) % kControllers) + "," +
                           Endpoint((dead + 2) % kControllers);
  for (int call = 0; call < 3; ++call) {
    AdminClient admin(coord::FindControllers(spec), 600ms,
                      AdminKeys());  // new each time: no memory of the last
    auto health = admin.Health();
    ASSERT_TRUE(health.ok()) << health.status().ToString();
    EXPECT_EQ(admin.endpoint(), Endpoint(leader));
  }
}

class SecureLeadershipTest : public LeadershipTest {
 protected:
  void SetUp() override {
    secure_ = true;
    LeadershipTest::SetUp();
  }
};

TEST_F(SecureLeadershipTest, KilledLeaderIsReplacedOverCurve) {
  const Failover f = Fail(SIGKILL);
  EXPECT_EQ(f.wrong, 0u);
  EXPECT_LT(f.silent, kTtl + 1500ms);
  EXPECT_EQ(testing::AliveNodes(Spec(), AdminKeys()), kNodes);
}

// Revocations are kept in etcd and read by every new leader before it
// answers: an engine revoked under one leader stays refused after a SIGKILL
// of it (before, the new leader started without the revocation), and its
// confirmed poisonings stay counted.
TEST_F(SecureLeadershipTest, ARevokedEngineStaysRefusedAcrossALeaderKill) {
  auto locate_as = [&](const std::string& engine) {
    AdminClient as(coord::FindControllers(Spec()), 1s, testing::DialKeys(keys_, engine));
    return as.Locate({objects_[0][0].key}).status();
  };
  EXPECT_TRUE(locate_as("bad").ok());
  auto revoked = AdminClient(coord::FindControllers(Spec()), 2s, AdminKeys())
                     .Json(MsgType::kAdminRevoke, {}, {.engine = "bad"});
  ASSERT_TRUE(revoked.ok()) << revoked.status().ToString();
  // Refused: at the CURVE handshake (ZAP), so no answer at all, or by the
  // handler when the connection predates the revocation.
  EXPECT_FALSE(locate_as("bad").ok());
  const Failover f = Fail(SIGKILL);
  const int leader = WaitLeader();
  ASSERT_GE(leader, 0);
  EXPECT_NE(leader, f.old_leader);
  EXPECT_TRUE(locate_as("honest").ok()) << "the new leader answers";
  const Status bad = locate_as("bad");
  EXPECT_FALSE(bad.ok()) << "the new leader answered the revoked engine";
}

// A controller without etcd keeps its revocations in its trust file: a
// revoked engine stays refused across a SIGKILL and restart. A trust file
// that cannot be read keeps the controller from answering, not from living.
TEST(LoneControllerTrust, ARevokedEngineStaysRefusedAcrossARestart) {
  testing::TestKeys keys({"node-a"});
  for (const char* engine : {"honest", "bad"}) keys.AddEngine(engine, "acme");
  testing::TempDir dir;
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(testing::FreePort());
  const std::string trust_file = dir.str() + "/trust.json";
  auto start = [&] {
    return testing::StartController(
        keys.With("controller", {"--endpoint", endpoint, "--http", "", "--trust-file", trust_file,
                                 "--log-level", "error"}));
  };
  const ChunkKey key{1, 2};
  auto locate_as = [&](const std::string& engine) {
    return AdminClient(endpoint, 1s, keys.Dial(engine)).Locate({key}).status();
  };
  auto controller = start();
  EXPECT_TRUE(locate_as("bad").ok());
  auto revoked = AdminClient(endpoint, 2s, keys.Dial("admin"))
                     .Json(MsgType::kAdminRevoke, {}, {.engine = "bad"});
  ASSERT_TRUE(revoked.ok()) << revoked.status().ToString();
  EXPECT_FALSE(locate_as("bad").ok());
  controller.process->Signal(SIGKILL);
  controller.process->Wait(5s);
  controller = start();
  EXPECT_TRUE(locate_as("honest").ok()) << "the restarted controller answers";
  EXPECT_FALSE(locate_as("bad").ok()) << "the restarted controller answered the revoked engine";
  // A damaged record: no answers (not even to honest engines), and no crash.
  controller.process->Signal(SIGKILL);
  controller.process->Wait(5s);
  { std::ofstream(trust_file) << "{\"revoked\": [tru"; }
  controller = start();
  const Status honest = locate_as("honest");
  EXPECT_EQ(honest.code(), ErrorCode::kUnavailable) << honest.ToString();
  EXPECT_TRUE(controller.process->Running());
}

// The lease is checked on the clock of each message: a message taken up
// after the lease ran out (the process stalled mid-batch) gets kNotLeader,
// whatever time the batch was received at.
TEST(LeaseClock, AMessageTakenUpAfterTheLeaseEndsIsNotAnsweredAsLeader) {
  if (!launch::EtcdCluster::Available()) GTEST_SKIP() << "etcd is not installed";
  // Logging is set up before any thread logs, as the daemons' mains do (the
  // election thread would otherwise create spdlog's registry, inside the
  // uninstrumented libspdlog, racing the first log line here under TSan).
  spdlog::set_level(spdlog::level::info);
  launch::EtcdCluster etcd(1);
  ASSERT_TRUE(etcd.Start().ok());
  ElectionOptions options;
  options.etcd = etcd.access();
  options.ttl = 2s;
  options.endpoint = "tcp://127.0.0.1:1";
  auto election = LeaderElection::Start(options);
  ASSERT_TRUE(election.ok());
  ASSERT_TRUE(WaitFor([&] { return (*election)->LeaderEpoch(Clock::now()) != 0; }, 10s));
  ClusterState state({}, 0);
  ControllerHandler handler(state, WireLimits{});
  handler.Follow(election->get());
  Header health;
  health.type = MsgType::kAdminHealth;
  const std::string bytes = EncodeHeader(health);
  const std::span<const uint8_t> header(reinterpret_cast<const uint8_t*>(bytes.data()),
                                        bytes.size());
  const auto received = Clock::now();  // the batch's time, while leading
  auto out = handler.Handle("id", nullptr, header, 0, received);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].header.status, ErrorCode::kOk);
  EXPECT_TRUE(handler.StillLeading());
  etcd.Pause(0);  // no renewal succeeds: the lease runs out on this clock
  ASSERT_TRUE(WaitFor([&] { return (*election)->LeaderEpoch(Clock::now()) == 0; }, 5s));
  out = handler.Handle("id", nullptr, header, 0, received);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].header.status, ErrorCode::kNotLeader);
  EXPECT_FALSE(handler.StillLeading());
  etcd.Resume(0);
}

// A fake controller: a ROUTER a real node reports to.
class FakeController {
 public:
  FakeController() {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::rcvtimeo, 200);
    socket_.bind(endpoint_);
  }
  const std::string& endpoint() const { return endpoint_; }
  // The next message of `type` from the node within `limit`, or nullopt.
  std::optional<Header> Next(MsgType type, std::chrono::milliseconds limit) {
    for (const auto until = Clock::now() + limit; Clock::now() < until;) {
      if (!RecvFrames(socket_, frames_, zmq::recv_flags::none)) continue;
      auto msg = ParseFrames(frames_, 1, WireLimits{});
      if (!msg.ok() || msg->header.type != type) continue;
      identity_.assign(static_cast<const char*>(frames_[0].data()), frames_[0].size());
      return msg->header;
    }
    return std::nullopt;
  }
  void Send(const Header& h) {
    std::vector<zmq::message_t> routing;
    routing.emplace_back(identity_.data(), identity_.size());
    ASSERT_TRUE(SendMessage(socket_, routing, h, {}, false));
  }
  // Answers as an elected leader of `epoch`.
  void Answer(const Header& request, const std::string& epoch, ErrorCode status = ErrorCode::kOk) {
    Header reply = ReplyTo(request, status);
    StampEpoch({epoch, 1}, reply);
    if (status == ErrorCode::kNotLeader) EncodeNotLeader({}, reply);
    Send(reply);
  }

 private:
  zmq::context_t context_;
  zmq::socket_t socket_{context_, zmq::socket_type::router};
  std::string endpoint_ = "tcp://127.0.0.1:" + std::to_string(testing::FreePort());
  std::vector<zmq::message_t> frames_;
  std::string identity_;
};

// A real node reporting to `fake`, its data in `dir`.
testing::NodeProcess NodeReportingTo(const FakeController& fake, const testing::TempDir& dir) {
  return testing::StartNode({"--endpoint", "tcp://127.0.0.1:*", "--data-dir", dir.str(),
                             "--node-id", "n1", "--controller", fake.endpoint(),
                             "--heartbeat-interval", "200ms", "--log-level", "warn"});
}

// A leader whose renewal came late pauses (kNotLeader, naming nobody) and
// resumes at the same endpoint: the node registers with it again.
TEST(FakeController, NodeRegistersAgainWhenItsLeaderResumes) {
  FakeController fake;
  testing::TempDir dir;
  auto node = NodeReportingTo(fake, dir);
  auto reg = fake.Next(MsgType::kRegister, 5s);
  ASSERT_TRUE(reg);
  fake.Answer(*reg, "10");
  auto beat = fake.Next(MsgType::kHeartbeat, 5s);
  ASSERT_TRUE(beat);
  fake.Answer(*beat, "10", ErrorCode::kNotLeader);  // paused
  auto again = fake.Next(MsgType::kRegister, 5s);
  ASSERT_TRUE(again) << "the node never registered again";
  fake.Answer(*again, "10");
  EXPECT_TRUE(fake.Next(MsgType::kHeartbeat, 5s));
}

// A node obeys only the leadership it registered with: a command stamped
// with an older elected epoch (a deposed leader's) is ignored.
TEST(FakeController, NodeIgnoresCommandsOfAnotherEpoch) {
  FakeController fake;
  testing::TempDir dir;
  auto node = NodeReportingTo(fake, dir);
  const auto object = testing::MakeObject(7, 4096);
  NodeClient client(node.tcp, 5s);
  ASSERT_TRUE(client.Put({&object.key, 1}, {&object.bytes, 1}).ok());
  auto reg = fake.Next(MsgType::kRegister, 5s);
  ASSERT_TRUE(reg);
  fake.Answer(*reg, "10");  // an elected leader of epoch 10
  auto command = [&](const std::string& epoch) {
    Header del;
    del.type = MsgType::kDelete;
    del.keys = {object.key};
    StampEpoch({epoch, 1}, del);
    fake.Send(del);
  };
  auto held = [&] {
    auto r = client.Exists({&object.key, 1});
    return r.ok() && (*r)[0] != 0;
  };
  command("9");  // a deposed leader's
  std::this_thread::sleep_for(500ms);
  EXPECT_TRUE(held()) << "a command of an older epoch was obeyed";
  command("10");
  EXPECT_TRUE(WaitFor([&] { return !held(); }, 5s)) << "the leader's command was not obeyed";
}

}  // namespace
}  // namespace pikv::controller
