// ControllerHandler without sockets: bytes in, addressed replies out.
#include "pikv/controller/controller_handler.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "pikv/controller/scoring.h"
#include "pikv/controller/views.h"
#include "pikv/proto/admin_wire.h"
#include "pikv/proto/control_wire.h"
#include "pikv/proto/location.h"

namespace pikv::controller {
namespace {

using namespace std::chrono_literals;

class ControllerHandlerTest : public ::testing::Test {
 protected:
  ClusterState state_{{2500ms, 5000ms}, 7};
  ControllerHandler handler_{state_, WireLimits{}};
  Clock::time_point now_ = Clock::now();

  std::vector<ControllerHandler::Outgoing> Send(const std::string& from, const Header& h,
                                                const CurvePeer* sender = nullptr) {
    const std::string bytes = EncodeHeader(h);
    return handler_.Handle(from, sender,
                           {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, 0, now_);
  }
  Header Register(const std::string& id, const std::string& host, const std::string& tcp) {
    Header h;
    h.type = MsgType::kRegister;
    h.fields = {{"node_id", id}, {"host", host}, {"tcp", tcp}, {"incarnation", int64_t{1}}};
    auto out = Send("peer-" + id, h);
    EXPECT_EQ(out.size(), 1u);
    return out.empty() ? Header{} : out[0].header;
  }
  // An admin reply's document: its one payload frame.
  static nlohmann::json Document(const ControllerHandler::Outgoing& reply) {
    if (reply.payloads.size() != 1) return nullptr;
    const SharedBuffer& doc = reply.payloads[0];
    return nlohmann::json::parse(
        std::string(reinterpret_cast<const char*>(doc.data()), doc.size()));
  }
  nlohmann::json Admin(MsgType type) {
    Header h;
    h.type = type;
    auto out = Send("cli", h);
    EXPECT_EQ(out.size(), 1u);
    return Document(out.at(0));
  }
};

// Strings that once made `admin nodes` throw, and /metrics print lines of
// the sender's choosing, are refused where they enter.
TEST_F(ControllerHandlerTest, RegistrationsCarryingBadStringsAreRefusedAndAdminStillAnswers) {
  EXPECT_EQ(Register("ok-node", "host-1", "tcp://127.0.0.1:7400").status, ErrorCode::kOk);
  EXPECT_EQ(Register("bad\xff\xfe", "h", "tcp://127.0.0.1:1").status, ErrorCode::kInvalidArgument);
  EXPECT_EQ(Register("n2", "h\xc3\x28", "tcp://127.0.0.1:1").status, ErrorCode::kInvalidArgument);
  EXPECT_EQ(Register("n3", "h", "tcp://\xff:1").status, ErrorCode::kInvalidArgument);
  EXPECT_EQ(Register("x\"}\npikv_controller_fake 1\n", "h", "tcp://127.0.0.1:1").status,
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(Admin(MsgType::kAdminNodes)["nodes"].size(), 1u);
  EXPECT_EQ(Admin(MsgType::kAdminStats)["per_node"].size(), 1u);
  const std::string metrics = MetricsText(state_, now_, Leadership{});
  EXPECT_EQ(metrics.find("pikv_controller_fake"), std::string::npos);
  EXPECT_EQ(handler_.rejected(), 4u);
}

// The handler's counters are a set (controller_stats.h): /metrics reads
// each as its family.
TEST_F(ControllerHandlerTest, HandlerCountersReachMetricsAsTheirFamilies) {
  EXPECT_EQ(Register("bad\xff\xfe", "h", "tcp://127.0.0.1:1").status, ErrorCode::kInvalidArgument);
  EXPECT_EQ(Register("n2", "h\xc3\x28", "tcp://127.0.0.1:1").status, ErrorCode::kInvalidArgument);
  const std::string metrics = MetricsText(state_, now_, Leadership{}, &handler_.counters());
  EXPECT_NE(metrics.find("\npikv_controller_rejected_requests_total 2\n"), std::string::npos);
  EXPECT_NE(metrics.find("\npikv_controller_leaderships_total 0\n"), std::string::npos);
  EXPECT_NE(metrics.find("\npikv_controller_step_downs_total 0\n"), std::string::npos);
  // Without the handler's set, the same series read zero.
  EXPECT_NE(
      MetricsText(state_, now_, Leadership{}).find("\npikv_controller_rejected_requests_total 0\n"),
      std::string::npos);
}

TEST_F(ControllerHandlerTest, UndecodableBytesGetAnErrorReplyToTheSender) {
  const uint8_t junk[] = {0xc1, 0x00, 0xff};
  auto out = handler_.Handle("someone", nullptr, junk, 0, now_);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].identity, "someone");
  EXPECT_EQ(out[0].header.type, MsgType::kError);
  EXPECT_EQ(handler_.Handle("someone", nullptr, {}, 0, now_).at(0).header.type, MsgType::kError);
  Header h;
  h.type = MsgType::kAdminNodes;
  const std::string bytes = EncodeHeader(h);
  auto with_payload = handler_.Handle(
      "x", nullptr, {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, 1, now_);
  EXPECT_EQ(with_payload.at(0).header.status, ErrorCode::kInvalidArgument);
}

TEST_F(ControllerHandlerTest, AdminCommandsGoToTheNodesThatRegistered) {
  Register("a", "h", "tcp://127.0.0.1:1");
  Register("b", "h", "tcp://127.0.0.1:2");
  Header evict;
  evict.type = MsgType::kAdminEvict;
  evict.keys = {ChunkKey{1, 2}};
  auto out = Send("cli", evict);
  ASSERT_EQ(out.size(), 3u);  // one command per node, then the reply
  EXPECT_EQ(out[0].identity, "peer-a");
  EXPECT_EQ(out[0].header.type, MsgType::kDelete);
  EXPECT_EQ(out[1].identity, "peer-b");
  EXPECT_EQ(out[2].identity, "cli");
  auto j = Document(out[2]);
  EXPECT_EQ(j["forwarded_to"], nlohmann::json::array({"a", "b"}));
  EXPECT_EQ(j["keys"], 1);

  // A revocation goes to every node, each command stamped with the
  // controller's epoch; one node sweeps the remote tier, whatever the
  // request claims.
  Header revoke = EncodeRevoke(MsgType::kAdminRevoke, {"bad", /*sweep_shared=*/true});
  out = Send("cli", revoke);
  ASSERT_EQ(out.size(), 3u);
  for (int i : {0, 1}) {
    EXPECT_EQ(out[i].header.type, MsgType::kRevoke);
    EXPECT_EQ(DecodeRevoke(out[i].header).engine, "bad");
    EXPECT_TRUE(EpochOf(out[i].header).epoch);
  }
  EXPECT_EQ(DecodeRevoke(out[0].header).sweep_shared + DecodeRevoke(out[1].header).sweep_shared, 1);
}

// A locate reply for a full batch of widely replicated keys must decode
// under the same limits on the client's side.
TEST_F(ControllerHandlerTest, LocateRepliesFitTheWireLimits) {
  std::vector<ChunkKey> keys;
  for (uint64_t i = 0; i < WireLimits{}.max_batch; ++i) keys.push_back({i, i + 1});
  for (int n = 0; n < 20; ++n) {
    const std::string id = "n" + std::to_string(n);
    Register(id, "h", "tcp://127.0.0.1:" + std::to_string(1000 + n));
    std::vector<int64_t> cpu(keys.size(), 0);
    state_.ApplyInventory(id, 1, 0, 0, true, {keys, cpu, {}}, now_);
  }
  Header locate;
  locate.type = MsgType::kLocate;
  locate.keys = keys;
  auto out = Send("client", locate);
  ASSERT_EQ(out.size(), 1u);
  const std::string bytes = EncodeHeader(out[0].header);
  auto reply = DecodeHeader({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->values.size(), keys.size() * 9);  // a count and 8 copies each
}

// Nodes report who wrote what they admit; locate shows it, answers an
// engine only within its tenant, and an audit's mismatch report drops the
// key everywhere and counts its writer, within the reporter's tenant only.
TEST_F(ControllerHandlerTest, ProvenanceTenantScopedLocateAndAuditMismatches) {
  Register("a", "h", "tcp://127.0.0.1:1");
  Register("b", "h", "tcp://127.0.0.1:2");
  const ChunkKey acme1{1, 1}, acme2{2, 2}, globex{3, 3};
  // seq 0: the inventory a node sends after registering; then events.
  auto report = [&](const std::string& node, int64_t seq, std::vector<ChunkKey> keys,
                    std::vector<int64_t> values, Fields owners) {
    Header h;
    h.type = seq == 0 ? MsgType::kInventory : MsgType::kEvents;
    h.fields = std::move(owners);
    h.fields["node_id"] = node;
    h.fields["incarnation"] = int64_t{1};
    h.fields["seq"] = seq;
    h.fields["part"] = int64_t{0};
    h.fields["final"] = int64_t{1};
    h.keys = std::move(keys);
    h.values = std::move(values);
    EXPECT_TRUE(Send("peer-" + node, h).empty());
  };
  report("a", 0, {acme1, acme2}, {EncodeHeld(TierKind::kCpu, 1), EncodeHeld(TierKind::kCpu, 2)},
         {{"owner.1", "acme/poisoner"}, {"owner.2", "acme/honest"}});
  report("a", 1, {globex}, {EncodeEvent(TierKind::kCpu, true, 1)}, {{"owner.1", "globex/g"}});
  // Node b holds acme2 by another writer, and sends an owner that does not parse.
  report("b", 0, {acme2, acme1}, {EncodeHeld(TierKind::kCpu, 1), EncodeHeld(TierKind::kDisk, 2)},
         {{"owner.1", "acme/poisoner"}, {"owner.2", "acme/bad name!"}});
  EXPECT_EQ(handler_.bad_owners(), 1u);

  Header locate;
  locate.type = MsgType::kLocate;
  locate.keys = {acme1, acme2, globex};
  EncodeLocate({.json = true}, locate);
  auto doc = Document(Send("cli", locate).at(0))["keys"];
  EXPECT_EQ(doc[0]["tenant"], "acme");
  EXPECT_EQ(doc[0]["writer"], "poisoner");
  EXPECT_EQ(doc[0]["several_writers"], false);  // b's unparsed owner is unknown, not another
  EXPECT_EQ(doc[0]["locations"].size(), 2u);
  EXPECT_EQ(doc[1]["writer"], "honest");
  EXPECT_EQ(doc[1]["several_writers"], true);
  EXPECT_EQ(doc[2]["tenant"], "globex");

  const CurvePeer acme_engine{Role::kEngine, "", "auditor", "acme"};
  const auto scoped = Send("engine", locate, &acme_engine).at(0).header.values;
  // Per key: a count then its copies; globex's key is answered as absent.
  EXPECT_EQ(scoped, (std::vector<int64_t>{2, scoped[1], scoped[2], 2, scoped[4], scoped[5], 0}));

  Header mismatch;
  mismatch.type = MsgType::kAuditMismatch;
  mismatch.keys = {acme1, globex, ChunkKey{9, 9}};
  auto out = Send("engine", mismatch, &acme_engine);
  ASSERT_EQ(out.size(), 3u);  // kDelete of acme1 to both nodes, then the reply
  EXPECT_EQ(out[0].header.type, MsgType::kDelete);
  EXPECT_EQ(out[0].header.keys, std::vector<ChunkKey>{acme1});
  EXPECT_EQ(out[2].header.values, std::vector<int64_t>{1});
  // Several writers: the writer the fetched object named is the one
  // reported; one report drops the key but counts no one.
  mismatch.keys = {acme2};
  mismatch.fields["writer.0"] = std::string("poisoner");
  mismatch.fields["checksum.0"] = int64_t{0x5eed};
  EXPECT_EQ(Send("engine", mismatch, &acme_engine).back().header.values, std::vector<int64_t>{1});
  EXPECT_EQ(Send("engine", mismatch, &acme_engine).back().header.values, std::vector<int64_t>{1});
  auto stats = Admin(MsgType::kAdminStats);
  EXPECT_EQ(stats["audit_mismatches"], 3);
  EXPECT_EQ(stats["audit_confirmed"], 0) << "the same reporter twice confirms nothing";
  EXPECT_EQ(stats["audit_reports_by_reporter"]["auditor"], 3);
  // Another engine's report of the same object (key and checksum) confirms
  // it; of another object (checksum) does not.
  const CurvePeer second{Role::kEngine, "", "auditor2", "acme"};
  mismatch.fields["checksum.0"] = int64_t{0x0bad};
  Send("engine2", mismatch, &second);
  EXPECT_EQ(Admin(MsgType::kAdminStats)["audit_confirmed"], 0);
  mismatch.fields["checksum.0"] = int64_t{0x5eed};
  Send("engine2", mismatch, &second);
  stats = Admin(MsgType::kAdminStats);
  EXPECT_EQ(stats["audit_confirmed"], 1);
  EXPECT_EQ(stats["confirmed_by_writer"]["poisoner"], 1);
  EXPECT_NE(MetricsText(state_, now_, Leadership{})
                .find("pikv_controller_audit_confirmed_total{writer=\"poisoner\"} 1"),
            std::string::npos);
  const CurvePeer node{Role::kNode, "a"};
  EXPECT_EQ(Send("peer-a", mismatch, &node).at(0).header.status, ErrorCode::kPermissionDenied);
}

// kScore: the score document over the wire, scoped to an engine's tenant
// like locate, with every query field checked before use.
TEST_F(ControllerHandlerTest, ScoreIsTenantScopedAndRefusesMalformedQueries) {
  Register("a", "h", "tcp://127.0.0.1:1");
  const ChunkKey acme{1, 1}, globex{3, 3};
  Header inventory;
  inventory.type = MsgType::kInventory;
  inventory.fields = {{"node_id", "a"},       {"incarnation", int64_t{1}}, {"seq", int64_t{0}},
                      {"part", int64_t{0}},   {"final", int64_t{1}},       {"owner.1", "acme/w"},
                      {"owner.2", "globex/w"}};
  inventory.keys = {acme, globex};
  inventory.values = {EncodeHeld(TierKind::kCpu, 1), EncodeHeld(TierKind::kDisk, 2)};
  ASSERT_TRUE(Send("peer-a", inventory).empty());

  Header score;
  score.type = MsgType::kScore;
  score.keys = {acme, globex};
  score.values = {10, 20};
  const auto tokens = [](const nlohmann::json& doc) {
    const auto& t = doc["nodes"].at(0)["tokens"];
    return std::vector<int>{t["cpu"], t["disk"], t["remote"], t["peer"], t["missing"]};
  };
  const nlohmann::json unscoped = Document(Send("cli", score).at(0));
  EXPECT_EQ(unscoped["tokens"], 30);
  EXPECT_EQ(unscoped["nodes"].at(0)["id"], "a");
  EXPECT_EQ(tokens(unscoped), (std::vector<int>{10, 20, 0, 0, 0}));
  const CurvePeer acme_engine{Role::kEngine, "", "e1", "acme"};
  EXPECT_EQ(tokens(Document(Send("engine", score, &acme_engine).at(0))),
            (std::vector<int>{10, 0, 0, 0, 20}))
      << "globex's chunk is missing for acme";
  EncodeScore({{"nobody"}}, score);
  EXPECT_TRUE(Document(Send("cli", score).at(0))["nodes"].empty());

  const auto refused = [&](Header h, const CurvePeer* sender = nullptr) {
    return Send("cli", h, sender).at(0).header.status;
  };
  Header bad = score;
  bad.values = {10};
  EXPECT_EQ(refused(bad), ErrorCode::kInvalidArgument) << "tokens for some keys";
  bad.values = {10, 0};
  EXPECT_EQ(refused(bad), ErrorCode::kInvalidArgument) << "a chunk of no tokens";
  bad.values = {10, kMaxChunkTokens + 1};
  EXPECT_EQ(refused(bad), ErrorCode::kInvalidArgument) << "past the limit";
  bad.keys.clear();
  bad.values.clear();
  EXPECT_EQ(refused(bad), ErrorCode::kInvalidArgument) << "no keys";
  const CurvePeer node{Role::kNode, "a"};
  EXPECT_EQ(refused(score, &node), ErrorCode::kPermissionDenied);
}

// A hostile (or broken) engine reporting every key of its tenant: it drops
// at most its burst and then its rate, is counted by name, and gets no
// honest writer counted; the rest of the cache stays.
TEST_F(ControllerHandlerTest, AHostileReporterIsRateLimitedAndCountsNoHonestWriter) {
  Register("a", "h", "tcp://127.0.0.1:1");
  std::vector<ChunkKey> keys;
  for (uint64_t i = 1; i <= 64; ++i) keys.push_back({i, i});
  Header inventory;
  inventory.type = MsgType::kInventory;
  inventory.fields = {{"node_id", std::string("a")}, {"incarnation", int64_t{1}},
                      {"seq", int64_t{0}},           {"part", int64_t{0}},
                      {"final", int64_t{1}},         {"owner.1", std::string("acme/honest")}};
  inventory.keys = keys;
  inventory.values.assign(keys.size(), EncodeHeld(TierKind::kCpu, 1));
  EXPECT_TRUE(Send("peer-a", inventory).empty());
  const CurvePeer hostile{Role::kEngine, "", "hostile", "acme"};
  Header report;
  report.type = MsgType::kAuditMismatch;
  report.keys = keys;
  for (size_t i = 0; i < keys.size(); ++i)
    report.fields["checksum." + std::to_string(i)] = int64_t{7};
  auto reply = Send("engine", report, &hostile).back().header;
  const auto burst = static_cast<int64_t>(AuditLedger::kBurst);
  EXPECT_EQ(reply.values, std::vector<int64_t>{burst});
  EXPECT_EQ(FieldInt(reply.fields, "refused"), 64 - burst);
  // Again at once: nothing more is dropped, and repeating confirms nothing.
  reply = Send("engine", report, &hostile).back().header;
  EXPECT_EQ(reply.values, std::vector<int64_t>{0});
  auto stats = Admin(MsgType::kAdminStats);
  EXPECT_EQ(stats["audit_mismatches"], burst);
  EXPECT_EQ(stats["audit_confirmed"], 0);
  EXPECT_TRUE(stats["confirmed_by_writer"].empty());
  EXPECT_EQ(stats["audit_refused_by_reporter"]["hostile"], 2 * 64 - burst);
  EXPECT_NE(MetricsText(state_, now_, Leadership{})
                .find("pikv_controller_audit_reports_refused_total{reporter=\"hostile\"} " +
                      std::to_string(2 * 64 - burst)),
            std::string::npos);
  // The keys past its burst are still located.
  for (size_t i = burst; i < keys.size(); ++i)
    EXPECT_FALSE(state_.Locate(keys[i], "").empty()) << i;
  // A minute later it may report kPerMinute more.
  now_ += std::chrono::minutes(1);
  EXPECT_EQ(Send("engine", report, &hostile).back().header.values,
            std::vector<int64_t>{static_cast<int64_t>(AuditLedger::kPerMinute)});
}

}  // namespace
}  // namespace pikv::controller
