// Streamed P2P pulls, from the receiving node's side: a real pikv-node pulls
// from a peer that the controller names. The peer here is a ZeroMQ socket in
// the test speaking the streamed reply (message.h) exactly, or cutting it off
// halfway (as a SIGKILLed peer does: its connection ends mid-stream), or
// sending bytes that do not verify, or frames of the wrong size. Whatever the
// peer does, the pull is a miss and the node keeps nothing of it.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <zmq.hpp>

#include "fake_node.h"
#include "pikv/rpc/node_client.h"
#include "pikv/transport/zmq_frames.h"
#include "test_support.h"

namespace pikv::node {
namespace {

using testing::MakeObject;
using testing::TestObject;
using Clock = std::chrono::steady_clock;

enum class Peer { kWhole, kHalfThenGone, kCorrupt, kOversizedFrame };

// Answers each get with a streamed reply of `object`, behaving as `mode` says.
class StreamingPeer {
 public:
  explicit StreamingPeer(TestObject object) : object_(std::move(object)) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind("tcp://127.0.0.1:*");
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this] { Serve(); });
  }
  ~StreamingPeer() {
    stop_ = true;
    thread_.join();
  }
  const std::string& endpoint() const { return endpoint_; }
  std::atomic<Peer> mode{Peer::kWhole};
  std::atomic<int> gets{0};

 private:
  void Serve() {
    std::vector<zmq::message_t> frames;
    while (!stop_) {
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(20)) == 0) continue;
      if (!RecvFrames(socket_, frames, zmq::recv_flags::dontwait) || frames.size() < 2) continue;
      auto request =
          DecodeHeader({static_cast<const uint8_t*>(frames[1].data()), frames[1].size()});
      if (!request.ok() || request->type != MsgType::kGet) continue;
      gets++;
      const std::string id(static_cast<const char*>(frames[0].data()), frames[0].size());
      const int64_t frame = StreamFrameOf(*request);
      Header reply = ReplyTo(*request);
      SetStreamFrame(frame, reply);
      reply.values = {0, static_cast<int64_t>(object_.bytes.size())};
      std::vector<zmq::message_t> routing;
      routing.emplace_back(id.data(), id.size());
      SendMessage(socket_, routing, reply, {});
      std::vector<uint8_t> bytes(object_.bytes.data(), object_.bytes.data() + object_.bytes.size());
      if (mode == Peer::kCorrupt) bytes[bytes.size() / 2] ^= 1;
      const size_t step = static_cast<size_t>(frame) + (mode == Peer::kOversizedFrame ? 1 : 0);
      const size_t end = mode == Peer::kHalfThenGone ? bytes.size() / 2 : bytes.size();
      for (size_t off = 0; off < end; off += step) {
        zmq::message_t to(id.data(), id.size());
        zmq::message_t part(bytes.data() + off, std::min(step, bytes.size() - off));
        socket_.send(to, zmq::send_flags::sndmore);
        socket_.send(part, zmq::send_flags::none);
      }
    }
  }

  TestObject object_;
  zmq::context_t context_;
  zmq::socket_t socket_{context_, zmq::socket_type::router};
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class StreamedPullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    controller_ = testing::StartController(
        {"--endpoint", "tcp://127.0.0.1:*", "--http", "", "--log-level", "error"});
    node_ = testing::StartNode({"--endpoint", "tcp://127.0.0.1:*", "--data-dir", dir_.str(),
                                "--disk", "false", "--controller", controller_.endpoint,
                                "--node-id", "receiver", "--heartbeat-interval", "100ms",
                                "--cpu-capacity", "64MiB", "--log-level", "error"});
    client_ = std::make_unique<rpc::NodeClient>(node_.tcp, std::chrono::seconds(10));
  }
  // Registers `peer` with the controller as holding `key` in CPU.
  void Announce(const StreamingPeer& peer, const ChunkKey& key) {
    fake_ = std::make_unique<testing::FakeNode>(controller_.endpoint, "sender");
    ASSERT_TRUE(fake_->Register(peer.endpoint(), "sender-host").ok());
    fake_->Inventory({key});
  }
  Result<SharedBuffer> Pull(const ChunkKey& key, const StreamingPeer& peer) {
    auto got = client_->Pull({&key, 1}, peer.endpoint(), std::chrono::milliseconds(1500));
    if (!got.ok()) return got.status();
    return std::move((*got)[0]);
  }
  int64_t Stat(const std::string& name) {
    auto s = client_->Stats();
    return s.ok() ? FieldInt(*s, name, -1) : -1;
  }
  void ExpectNothingKept() {
    EXPECT_EQ(Stat("cpu.entries"), 0);
    EXPECT_EQ(Stat("cpu.used_bytes"), 0);  // no reservation left behind
  }

  testing::TempDir dir_;
  testing::ControllerProcess controller_;
  testing::NodeProcess node_;
  std::unique_ptr<rpc::NodeClient> client_;
  std::unique_ptr<testing::FakeNode> fake_;
};

TEST_F(StreamedPullTest, AWholeStreamIsAdmittedByteForByte) {
  TestObject object = MakeObject(1, 8 << 20);
  StreamingPeer peer(object);
  Announce(peer, object.key);
  auto got = Pull(object.key, peer);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), object.bytes.size());
  EXPECT_EQ(0, std::memcmp(got->data(), object.bytes.data(), object.bytes.size()));
  EXPECT_EQ(Stat("p2p.pulled_streamed"), 1);
  EXPECT_EQ(Stat("cpu.entries"), 1);
}

TEST_F(StreamedPullTest, AStreamCutHalfwayIsAMissAndLeavesNothing) {
  TestObject object = MakeObject(2, 8 << 20);
  StreamingPeer peer(object);
  peer.mode = Peer::kHalfThenGone;
  Announce(peer, object.key);
  auto got = Pull(object.key, peer);
  EXPECT_FALSE(got.ok());
  ExpectNothingKept();
  EXPECT_GE(Stat("p2p.pull_failures"), 1);
  // The broken connection was dropped: a whole stream on a new one lands.
  peer.mode = Peer::kWhole;
  got = Pull(object.key, peer);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(0, std::memcmp(got->data(), object.bytes.data(), object.bytes.size()));
}

TEST_F(StreamedPullTest, BytesThatDoNotVerifyOrFramesOfTheWrongSizeAreRefused) {
  TestObject object = MakeObject(3, 8 << 20);
  StreamingPeer peer(object);
  Announce(peer, object.key);
  for (Peer mode : {Peer::kCorrupt, Peer::kOversizedFrame}) {
    peer.mode = mode;
    auto got = Pull(object.key, peer);
    EXPECT_FALSE(got.ok());
    ExpectNothingKept();
  }
  EXPECT_EQ(Stat("storage.put_rejects"), 1);  // the corrupt one reached verification
  EXPECT_EQ(Stat("p2p.pulled_objects"), 0);
}

}  // namespace
}  // namespace pikv::node
