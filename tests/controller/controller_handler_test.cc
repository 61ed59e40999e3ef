// ControllerHandler without sockets: bytes in, addressed replies out.
#include "pikv/controller/controller_handler.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "pikv/controller/views.h"

namespace pikv::controller {
namespace {

using namespace std::chrono_literals;

class ControllerHandlerTest : public ::testing::Test {
 protected:
  ClusterState state_{{2500ms, 5000ms}, 7};
  ControllerHandler handler_{state_, WireLimits{}};
  Clock::time_point now_ = Clock::now();

  std::vector<ControllerHandler::Outgoing> Send(const std::string& from, const Header& h) {
    const std::string bytes = EncodeHeader(h);
    return handler_.Handle(from, nullptr,
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
    state_.ApplyInventory(id, 1, 0, 0, true, keys, cpu, now_);
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

}  // namespace
}  // namespace pikv::controller
