// Streamed puts and gets over tcp (message.h), against a real pikv-node:
// objects cross in bounded frames and read back byte-identical; bytes that do
// not verify are refused and an honest put of the key then works; a client
// cut off halfway (its socket closed, as a killed process's is) leaves no
// object and its reserved space is freed once the stream stalls; a frame of
// the wrong size ends the stream; hostile stream requests get clear errors.
// A batch of whole objects goes as several messages, each key answered in
// its place, a message refused whole its keys' outcome alone.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <zmq.hpp>

#include "pikv/rpc/node_client.h"
#include "pikv/transport/zmq_frames.h"
#include "test_support.h"

namespace pikv::node {
namespace {

using namespace std::chrono_literals;
using testing::MakeObject;
using testing::TestObject;

constexpr uint64_t kFrame = 1 << 20;

class StreamedPutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    node_ = testing::StartNode({"--endpoint", "tcp://127.0.0.1:*", "--data-dir", dir_.str(),
                                "--controller", "", "--cpu-capacity", "64MiB", "--disk", "false",
                                "--log-level", "error"});
  }
  std::unique_ptr<rpc::NodeClient> Client(uint64_t frame = kFrame) {
    auto c = std::make_unique<rpc::NodeClient>(node_.tcp, 5s);
    c->set_stream_frame(frame);
    return c;
  }
  int64_t Stat(const std::string& name) {
    auto f = rpc::NodeClient(node_.tcp, 5s).Stats();
    return f.ok() ? FieldInt(*f, name, -1) : -1;
  }
  uint8_t Where(const ChunkKey& key) {
    auto m = rpc::NodeClient(node_.tcp, 5s).Exists({&key, 1});
    return m.ok() ? (*m)[0] : 0xff;
  }

  testing::TempDir dir_;
  testing::NodeProcess node_;
};

// A raw DEALER speaking the stream itself, to misbehave on purpose.
class RawStreamer {
 public:
  explicit RawStreamer(const std::string& endpoint) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.connect(endpoint);
  }
  Header Start(const ChunkKey& key, int64_t size, int64_t frame = kFrame) {
    Header h;
    h.type = MsgType::kPut;
    h.request_id = 7;
    h.keys = {key};
    EncodeStreamedPut({frame, size}, h);
    return Call(h);
  }
  Header Call(const Header& h, std::vector<SharedBuffer> payloads = {}) {
    std::vector<zmq::message_t> none;
    SendMessage(socket_, none, h, payloads);
    return Receive();
  }
  void Send(std::span<const uint8_t> bytes) {
    zmq::message_t m(bytes.data(), bytes.size());
    socket_.send(m, zmq::send_flags::none);
  }
  Header Receive() {
    std::vector<zmq::message_t> frames;
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(5000)) == 0) return Header{};
    RecvFrames(socket_, frames);
    auto m = ParseFrames(frames, 0, WireLimits{});
    return m.ok() ? m->header : Header{};
  }
  void Close() { socket_.close(); }

 private:
  zmq::context_t context_;
  zmq::socket_t socket_{context_, zmq::socket_type::dealer};
};

TEST_F(StreamedPutTest, ObjectsCrossInFramesAndReadBackIdentical) {
  auto client = Client();
  std::vector<TestObject> objects;
  for (size_t size :
       {size_t{100} << 10, (size_t{3} << 20) + 17, (size_t{5} << 20) + 17, size_t{40} << 20})
    objects.push_back(MakeObject(size, size));
  for (const auto& o : objects) {
    auto put = client->Put({&o.key, 1}, {&o.bytes, 1});
    ASSERT_TRUE(put.ok() && (*put)[0].ok()) << o.bytes.size();
    auto got = client->Get({&o.key, 1});
    ASSERT_TRUE(got.ok() && (*got)[0].ok()) << o.bytes.size();
    ASSERT_EQ((*got)[0]->size(), o.bytes.size());
    EXPECT_EQ(std::memcmp((*got)[0]->data(), o.bytes.data(), o.bytes.size()), 0);
  }
  // Up to kWholeObjectBytes an object goes whole either way (a stream costs
  // a round trip or a copy more); past it, in frames.
  static_assert(kWholeObjectBytes > (size_t{3} << 20) + 17 &&
                kWholeObjectBytes < (size_t{5} << 20));
  EXPECT_EQ(Stat("streamed_puts.completed"), 2) << "the 100 KiB and 3 MiB objects went whole";
  EXPECT_EQ(Stat("requests.streamed"), 2) << "the 100 KiB and 3 MiB objects came back whole";
  // A batch is streamed when its objects together are larger.
  const TestObject other = MakeObject(7, 3 << 20);
  auto put = client->Put({&other.key, 1}, {&other.bytes, 1});
  ASSERT_TRUE(put.ok() && (*put)[0].ok());
  const ChunkKey small[] = {objects[1].key, other.key};
  auto both = client->Get(small);
  ASSERT_TRUE(both.ok() && (*both)[0].ok() && (*both)[1].ok());
  EXPECT_EQ(Stat("requests.streamed"), 3) << "two of 3 MiB are over kWholeObjectBytes";
  EXPECT_EQ(std::memcmp((*both)[1]->data(), other.bytes.data(), other.bytes.size()), 0);
  // A whole-object client reads what was streamed in, and the reverse.
  auto whole = Client(0);
  auto got = whole->Get({&objects[3].key, 1});
  ASSERT_TRUE(got.ok() && (*got)[0].ok());
  EXPECT_EQ(std::memcmp((*got)[0]->data(), objects[3].bytes.data(), objects[3].bytes.size()), 0);
}

// A batch of whole objects goes as several messages sent together (at most
// kPutMessageBytes or max_batch keys each), stored as each arrives; every
// key's outcome comes back in its place, a corrupt object's among them.
TEST_F(StreamedPutTest, ABatchGoesAsSeveralMessagesEachKeyAnsweredInItsPlace) {
  std::vector<TestObject> objects;
  for (uint64_t i = 0; i < 20; ++i) objects.push_back(MakeObject(300 + i, 1024));
  std::vector<uint8_t> bad(objects[9].bytes.data(),
                           objects[9].bytes.data() + objects[9].bytes.size());
  bad.back() ^= 1;  // the payload's last byte: the checksum no longer holds
  objects[9].bytes = SharedBuffer::FromVector(std::move(bad));
  std::vector<ChunkKey> keys;
  std::vector<SharedBuffer> bytes;
  for (const auto& o : objects) keys.push_back(o.key), bytes.push_back(o.bytes);
  WireLimits eight;
  eight.max_batch = 8;
  rpc::NodeClient client(node_.tcp, 5s, eight);
  const int64_t before = Stat("requests.put");
  auto put = client.Put(keys, bytes);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(Stat("requests.put") - before, 3) << "20 keys, 8 a message";
  for (size_t i = 0; i < objects.size(); ++i) {
    EXPECT_EQ((*put)[i].code(), i == 9 ? ErrorCode::kCorruption : ErrorCode::kOk) << i;
    EXPECT_EQ(Where(keys[i]), i == 9 ? 0 : 1) << i;
  }
  // By size: objects of 700 KiB go one a message, as the node reads them back.
  const TestObject a = MakeObject(400, 700 << 10), b = MakeObject(401, 700 << 10);
  const ChunkKey two[] = {a.key, b.key};
  const SharedBuffer two_bytes[] = {a.bytes, b.bytes};
  auto big = Client()->Put(two, two_bytes);
  ASSERT_TRUE(big.ok() && (*big)[0].ok() && (*big)[1].ok());
  EXPECT_EQ(Stat("requests.put") - before, 5);
  auto got = Client()->Get(two);
  ASSERT_TRUE(got.ok() && (*got)[0].ok() && (*got)[1].ok());
  EXPECT_EQ(std::memcmp((*got)[1]->data(), b.bytes.data(), b.bytes.size()), 0);
}

// A message of a batch that the node refuses as a whole (an object over
// its --max-object-size) is each of its keys' outcome; the batch's other
// messages are stored and answered as usual.
TEST_F(StreamedPutTest, AMessageRefusedWholeIsItsKeysOutcomeAndTheRestAreStored) {
  testing::TempDir dir;
  auto small = testing::StartNode({"--endpoint", "tcp://127.0.0.1:*", "--data-dir", dir.str(),
                                   "--controller", "", "--cpu-capacity", "16MiB", "--disk", "false",
                                   "--max-object-size", "512KiB", "--log-level", "error"});
  // About 65 KiB, 1 MiB and 65 KiB: each pair passes kPutMessageBytes,
  // so one message each.
  const TestObject a = MakeObject(500, 64 << 10), b = MakeObject(501, 1 << 20),
                   c = MakeObject(502, 64 << 10);
  ASSERT_GT(a.bytes.size() + b.bytes.size(), kPutMessageBytes);
  ASSERT_LT(a.bytes.size(), size_t{512} << 10);
  ASSERT_GT(b.bytes.size(), size_t{512} << 10);
  const ChunkKey keys[] = {a.key, b.key, c.key};
  const SharedBuffer bytes[] = {a.bytes, b.bytes, c.bytes};
  rpc::NodeClient client(small.tcp, 5s);
  auto put = client.Put(keys, bytes);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_TRUE((*put)[0].ok()) << (*put)[0].ToString();
  EXPECT_EQ((*put)[1].code(), ErrorCode::kTooLarge);
  EXPECT_TRUE((*put)[2].ok()) << (*put)[2].ToString();
  auto there = client.Exists(keys);
  ASSERT_TRUE(there.ok());
  EXPECT_EQ(*there, (std::vector<uint8_t>{1, 0, 1}));
}

// Streamed gets land in buffers the client reuses once they are released,
// never while the caller still holds one.
TEST_F(StreamedPutTest, ReceiveBuffersAreReusedOnlyOnceReleased) {
  // Over kWholeObjectBytes: smaller objects come back whole, in ZeroMQ's memory.
  auto x = MakeObject(20, 5 << 20), y = MakeObject(21, 5 << 20);
  auto client = Client();
  for (const auto* o : {&x, &y}) {
    auto put = client->Put({&o->key, 1}, {&o->bytes, 1});
    ASSERT_TRUE(put.ok() && (*put)[0].ok());
  }
  auto got_x = client->Get({&x.key, 1});
  ASSERT_TRUE(got_x.ok() && (*got_x)[0].ok());
  const SharedBuffer held = *(*got_x)[0];
  got_x = Status::Ok();
  auto got_y = client->Get({&y.key, 1});
  ASSERT_TRUE(got_y.ok() && (*got_y)[0].ok());
  EXPECT_NE((*got_y)[0]->data(), held.data());
  EXPECT_EQ(std::memcmp(held.data(), x.bytes.data(), x.bytes.size()), 0) << "x is intact";
  const uint8_t* y_at = (*got_y)[0]->data();
  got_y = Status::Ok();  // released: the next object that fits lands there
  auto again = client->Get({&x.key, 1});
  ASSERT_TRUE(again.ok() && (*again)[0].ok());
  EXPECT_EQ((*again)[0]->data(), y_at);
  EXPECT_EQ(std::memcmp((*again)[0]->data(), x.bytes.data(), x.bytes.size()), 0);
}

TEST_F(StreamedPutTest, BytesThatDoNotVerifyAreRefusedAndAnHonestPutThenWorks) {
  auto o = MakeObject(1, 5 << 20);
  std::vector<uint8_t> bad(o.bytes.data(), o.bytes.data() + o.bytes.size());
  bad[bad.size() - 100] ^= 1;
  const SharedBuffer poisoned = SharedBuffer::FromVector(bad);
  auto client = Client();
  auto put = client->Put({&o.key, 1}, {&poisoned, 1});
  ASSERT_TRUE(put.ok());
  EXPECT_FALSE((*put)[0].ok());
  EXPECT_EQ(Where(o.key), 0);
  EXPECT_EQ(Stat("streamed_puts.refused"), 1);
  put = client->Put({&o.key, 1}, {&o.bytes, 1});
  ASSERT_TRUE(put.ok() && (*put)[0].ok());
  auto got = client->Get({&o.key, 1});
  ASSERT_TRUE(got.ok() && (*got)[0].ok());
  EXPECT_EQ(std::memcmp((*got)[0]->data(), o.bytes.data(), o.bytes.size()), 0);
}

TEST_F(StreamedPutTest, AClientCutOffHalfwayLeavesNothingAndItsSpaceIsFreed) {
  auto o = MakeObject(2, 48 << 20);
  {
    RawStreamer raw(node_.tcp);
    const Header go = raw.Start(o.key, static_cast<int64_t>(o.bytes.size()));
    ASSERT_EQ(go.status, ErrorCode::kOk);
    ASSERT_TRUE(HasStreamFrame(go)) << "space reserved: send";
    for (uint64_t off = 0; off < o.bytes.size() / 2; off += kFrame)
      raw.Send({o.bytes.data() + off, kFrame});
    raw.Close();  // what a killed client's connection does
  }
  // 48 of the arena's 64 MiB are reserved by the broken stream: another
  // 48 MiB object has no room until the stall frees them.
  auto other = MakeObject(3, 48 << 20);
  auto client = Client();
  auto put = client->Put({&other.key, 1}, {&other.bytes, 1});
  ASSERT_TRUE(put.ok());
  EXPECT_FALSE((*put)[0].ok()) << "the half-sent stream still holds its space";
  std::this_thread::sleep_for(std::chrono::milliseconds(kStreamStallMs) + 500ms);
  EXPECT_EQ(Stat("streamed_puts.expired"), 1);
  EXPECT_EQ(Where(o.key), 0) << "nothing of the cut stream is visible";
  put = client->Put({&other.key, 1}, {&other.bytes, 1});
  ASSERT_TRUE(put.ok() && (*put)[0].ok()) << (*put)[0].ToString();
}

TEST_F(StreamedPutTest, AFrameOfTheWrongSizeEndsTheStreamAndTheClientCarriesOn) {
  auto o = MakeObject(4, 3 << 20);
  RawStreamer raw(node_.tcp);
  ASSERT_TRUE(HasStreamFrame(raw.Start(o.key, static_cast<int64_t>(o.bytes.size()))));
  raw.Send({o.bytes.data(), kFrame + 1});
  const Header end = raw.Receive();
  EXPECT_EQ(end.request_id, 7u) << "the stream's put is answered";
  ASSERT_EQ(end.values.size(), 1u);
  EXPECT_EQ(static_cast<ErrorCode>(end.values[0]), ErrorCode::kProtocol);
  EXPECT_EQ(Stat("streamed_puts.broken"), 1);
  EXPECT_EQ(Where(o.key), 0);
  Header ping;
  ping.type = MsgType::kPing;
  ping.request_id = 8;
  EXPECT_EQ(raw.Call(ping).status, ErrorCode::kOk) << "its next message is a request again";
}

TEST_F(StreamedPutTest, HostileStreamRequestsGetClearErrors) {
  auto o = MakeObject(5, 2 << 20);
  RawStreamer raw(node_.tcp);
  const int64_t size = static_cast<int64_t>(o.bytes.size());
  EXPECT_EQ(raw.Start(o.key, 0).status, ErrorCode::kInvalidArgument);
  EXPECT_EQ(raw.Start(o.key, int64_t{1} << 40).status, ErrorCode::kInvalidArgument);
  EXPECT_EQ(raw.Start(o.key, size, 1).status, ErrorCode::kInvalidArgument);
  EXPECT_EQ(raw.Start(o.key, size, int64_t{1} << 40).status, ErrorCode::kInvalidArgument);
  Header two;
  two.type = MsgType::kPut;
  two.keys = {o.key, MakeObject(6, 1024).key};
  EncodeStreamedPut({kFrame, size}, two);
  EXPECT_EQ(raw.Call(two).status, ErrorCode::kInvalidArgument);
  two.keys = {o.key};
  EXPECT_EQ(raw.Call(two, {o.bytes}).status, ErrorCode::kInvalidArgument) << "bytes attached";
  // More streams than the node allows at once: the next is told to retry.
  std::vector<std::unique_ptr<RawStreamer>> open;
  for (int i = 0; i < 16; ++i) {
    open.push_back(std::make_unique<RawStreamer>(node_.tcp));
    ASSERT_TRUE(HasStreamFrame(open.back()->Start(MakeObject(10 + i, 1024).key, 1 << 20)));
  }
  const Header busy = raw.Start(o.key, size);
  ASSERT_EQ(busy.values.size(), 1u);
  EXPECT_EQ(static_cast<ErrorCode>(busy.values[0]), ErrorCode::kRetry);
  EXPECT_TRUE(rpc::NodeClient(node_.tcp, 2s).Ping().ok());
}

}  // namespace
}  // namespace pikv::node
