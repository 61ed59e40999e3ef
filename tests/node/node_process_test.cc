// Black-box tests of the real pikv-node binary over tcp and ipc.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <thread>
#include <zmq.hpp>

#include "pikv/proto/message.h"
#include "pikv/rpc/node_client.h"
#include "pikv/transport/zmq_frames.h"
#include "test_support.h"

namespace pikv::node {
namespace {

using rpc::NodeClient;
using testing::MakeObject;
using testing::NodeProcess;
using testing::StartNode;
using testing::TempDir;
using testing::TestObject;

constexpr auto kTimeout = std::chrono::seconds(30);

class NodeProcessTest : public ::testing::Test {
 protected:
  std::vector<std::string> Args() {
    return {"--endpoint",        "tcp://127.0.0.1:*",
            "--endpoint",        "ipc://" + dir_.str() + "/node.sock",
            "--data-dir",        dir_.str(),
            "--cpu-capacity",    "3GiB",
            "--max-object-size", "80MiB",
            "--controller",      "",
            "--log-level",       "warn"};
  }
  void Start() {
    node_ = StartNode(Args());
    ASSERT_FALSE(node_.tcp.empty());
    ASSERT_FALSE(node_.ipc.empty());
  }
  int StopWithSigterm() {
    node_.process->Signal(SIGTERM);
    auto code = node_.process->Wait(std::chrono::seconds(30));
    return code.value_or(-1);
  }
  static bool Same(const SharedBuffer& a, const SharedBuffer& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
  }

  // Sends raw frames on a DEALER socket and returns the decoded reply header.
  Result<Header> RawRequest(const std::vector<std::string>& frames) {
    zmq::socket_t s(ClientContext(), zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::rcvtimeo, 10000);
    s.connect(node_.tcp);
    for (size_t i = 0; i < frames.size(); ++i) {
      s.send(zmq::buffer(frames[i]),
             i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
    std::vector<zmq::message_t> reply;
    if (!RecvFrames(s, reply)) return Timeout("no reply");
    return DecodeHeader({static_cast<const uint8_t*>(reply[0].data()), reply[0].size()});
  }
  std::string Encoded(MsgType type, uint64_t id, std::vector<ChunkKey> keys = {},
                      uint16_t version = kProtocolVersion) {
    Header h;
    h.version = version;
    h.type = type;
    h.request_id = id;
    h.keys = std::move(keys);
    return EncodeHeader(h);
  }

  TempDir dir_;
  NodeProcess node_;
};

TEST_F(NodeProcessTest, TwoHundredObjectsFromOneKiBTo64MiBOverTcpAndIpc) {
  Start();
  NodeClient tcp(node_.tcp, kTimeout), ipc(node_.ipc, kTimeout);
  std::vector<TestObject> objs;
  for (int i = 0; i < 200; ++i) {
    // Log-spaced sizes: 1 KiB * 2^(16 i / 199), the last one 64 MiB.
    auto size = static_cast<size_t>(1024.0 * std::pow(2.0, 16.0 * i / 199.0));
    objs.push_back(MakeObject(1000 + i, size));
    NodeClient& via = i % 2 == 0 ? tcp : ipc;
    auto put = via.Put({&objs.back().key, 1}, {&objs.back().bytes, 1});
    ASSERT_TRUE(put.ok()) << put.status().ToString();
    ASSERT_TRUE((*put)[0].ok()) << "object " << i << ": " << (*put)[0].ToString();
  }
  EXPECT_GE(objs.back().bytes.size(), 64u << 20);
  for (size_t i = 0; i < objs.size(); ++i) {
    for (NodeClient* via : {&tcp, &ipc}) {
      auto got = via->Get({&objs[i].key, 1});
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_TRUE((*got)[0].ok()) << "object " << i << " missing";
      ASSERT_TRUE(Same(*(*got)[0], objs[i].bytes)) << "object " << i << " differs";
    }
  }
  // A batched get mixes hits and a miss, in order.
  std::vector<ChunkKey> keys = {objs[3].key, MakeObject(1, 1024).key, objs[5].key};
  auto batch = tcp.Get(keys);
  ASSERT_TRUE(batch.ok());
  EXPECT_TRUE((*batch)[0].ok());
  EXPECT_EQ((*batch)[1].code(), ErrorCode::kNotFound);
  ASSERT_TRUE((*batch)[2].ok());
  EXPECT_TRUE(Same(*(*batch)[2], objs[5].bytes));
  EXPECT_EQ(StopWithSigterm(), 0);
}

TEST_F(NodeProcessTest, EveryBadMessageGetsAnErrorReplyAndTheNodeKeepsServing) {
  Start();
  NodeClient client(node_.tcp, kTimeout);
  auto good = MakeObject(1, 4096);
  ASSERT_TRUE(client.Put({&good.key, 1}, {&good.bytes, 1}).ok());

  struct Case {
    std::string name;
    std::vector<std::string> frames;
    ErrorCode expect;
  };
  std::string valid = Encoded(MsgType::kGet, 7, {good.key});
  std::string obj(reinterpret_cast<const char*>(good.bytes.data()), good.bytes.size());
  std::string corrupt = obj;
  corrupt[corrupt.size() - 1] ^= 1;
  std::vector<Case> cases = {
      {"garbage header", {"\xc1\xc1 this is not msgpack"}, ErrorCode::kProtocol},
      {"empty header frame", {""}, ErrorCode::kProtocol},
      {"truncated header", {valid.substr(0, valid.size() / 2)}, ErrorCode::kProtocol},
      {"header over its limit", {std::string(2 << 20, '\x90')}, ErrorCode::kTooLarge},
      {"payload over its limit",
       {Encoded(MsgType::kPut, 8, {good.key}), std::string(81 << 20, 'x')},
       ErrorCode::kTooLarge},
      {"unknown type", {Encoded(static_cast<MsgType>(999), 9)}, ErrorCode::kUnsupported},
      {"wrong version", {Encoded(MsgType::kGet, 10, {}, 99)}, ErrorCode::kUnsupported},
      {"keys without payloads",
       {Encoded(MsgType::kPut, 11, {good.key, good.key}), obj},
       ErrorCode::kInvalidArgument},
      {"payload on a get", {valid, obj}, ErrorCode::kInvalidArgument},
  };
  for (const Case& c : cases) {
    auto reply = RawRequest(c.frames);
    ASSERT_TRUE(reply.ok()) << c.name << ": " << reply.status().ToString();
    EXPECT_EQ(reply->status, c.expect) << c.name << ": " << reply->reason;
    EXPECT_FALSE(reply->reason.empty()) << c.name;
    // Still serving, and the stored object is intact.
    auto got = client.Get({&good.key, 1});
    ASSERT_TRUE(got.ok()) << "after " << c.name << ": " << got.status().ToString();
    ASSERT_TRUE((*got)[0].ok());
    EXPECT_TRUE(Same(*(*got)[0], good.bytes));
  }
  // A corrupt object is refused per key, and nothing is stored under its key.
  auto bad = RawRequest({Encoded(MsgType::kPut, 12, {good.key}), corrupt});
  ASSERT_TRUE(bad.ok());
  ASSERT_EQ(bad->values.size(), 1u);
  EXPECT_EQ(static_cast<ErrorCode>(bad->values[0]), ErrorCode::kCorruption);

  auto stats = client.Stats();
  ASSERT_TRUE(stats.ok());
  auto count = [&](const char* name) { return std::get<int64_t>(stats->at(name)); };
  EXPECT_EQ(count("errors.malformed"), 3);
  EXPECT_EQ(count("errors.too_large"), 2);
  EXPECT_EQ(count("errors.unsupported"), 2);
  EXPECT_EQ(count("errors.bad_request"), 2);
  EXPECT_EQ(count("storage.put_rejects"), 1);
  EXPECT_EQ(StopWithSigterm(), 0);
}

TEST_F(NodeProcessTest, DiskTierServesAfterRestart) {
  Start();
  auto o = MakeObject(2, 1 << 20);
  {
    NodeClient client(node_.ipc, kTimeout);
    ASSERT_TRUE(client.Put({&o.key, 1}, {&o.bytes, 1}).ok());
  }
  ASSERT_EQ(StopWithSigterm(), 0);  // drains write-through and flushes RocksDB
  Start();
  NodeClient client(node_.ipc, kTimeout);
  auto where = client.Exists({&o.key, 1});
  ASSERT_TRUE(where.ok());
  EXPECT_EQ((*where)[0], 1 << 1);  // disk only: the CPU tier started empty
  auto got = client.Get({&o.key, 1});
  ASSERT_TRUE(got.ok() && (*got)[0].ok());
  EXPECT_TRUE(Same(*(*got)[0], o.bytes));
  EXPECT_EQ(StopWithSigterm(), 0);
}

// A node told to stop while its arena is still being faulted in stops at
// once (the prefaulter checks between 64 MiB steps) and cleanly.
TEST_F(NodeProcessTest, StopsPromptlyWhileItsArenaIsStillFaultingIn) {
  auto args = Args();
  *std::find(args.begin(), args.end(), "3GiB") = "8GiB";
  args.insert(args.end(), {"--disk", "false", "--prefault", "true"});
  node_ = StartNode(args);
  ASSERT_FALSE(node_.tcp.empty());
  NodeClient client(node_.tcp, kTimeout);
  auto stats = client.Stats();
  ASSERT_TRUE(stats.ok());
  const int64_t faulted = std::get<int64_t>(stats->at("cpu.faulted_bytes"));
  ASSERT_LT(faulted, int64_t{8} << 30) << "8 GiB faulted in already: nothing left to stop";
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(StopWithSigterm(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST_F(NodeProcessTest, PinDeleteAndMissesOverTheWire) {
  Start();
  NodeClient client(node_.tcp, kTimeout);
  auto o = MakeObject(3, 8192);
  auto absent = MakeObject(4, 1024);
  ASSERT_TRUE(client.Put({&o.key, 1}, {&o.bytes, 1}).ok());
  std::vector<ChunkKey> both = {o.key, absent.key};
  auto pin = client.Pin(both);
  ASSERT_TRUE(pin.ok());
  EXPECT_TRUE((*pin)[0].ok());
  EXPECT_EQ((*pin)[1].code(), ErrorCode::kNotFound);
  EXPECT_TRUE((*client.Unpin({&o.key, 1}))[0].ok());
  EXPECT_TRUE((*client.Delete({&o.key, 1}))[0].ok());
  EXPECT_EQ((*client.Exists({&o.key, 1}))[0], 0);
  EXPECT_EQ((*client.Get({&o.key, 1}))[0].code(), ErrorCode::kNotFound);
  EXPECT_EQ(StopWithSigterm(), 0);
}

TEST_F(NodeProcessTest, KeepsServingWithRedisDeadAndRecoversWhenItReturns) {
  testing::RedisServer redis;
  auto args = Args();
  args.insert(args.end(), {"--redis", redis.address()});
  node_ = StartNode(args);
  NodeClient client(node_.tcp, kTimeout);
  auto stat = [&](const char* name) { return std::get<int64_t>(client.Stats()->at(name)); };
  auto before = MakeObject(20, 64 << 10);
  ASSERT_TRUE((*client.Put({&before.key, 1}, {&before.bytes, 1}))[0].ok());
  // Written through to Redis: another node could read it there.
  for (int i = 0; i < 100 && stat("remote.admits") < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(stat("remote.admits"), 1);

  redis.Kill();
  auto during = MakeObject(21, 64 << 10);
  auto put = client.Put({&during.key, 1}, {&during.bytes, 1});
  ASSERT_TRUE(put.ok() && (*put)[0].ok()) << "a put must not fail because Redis is down";
  for (const auto& o : {before, during}) {
    auto got = client.Get({&o.key, 1});
    ASSERT_TRUE(got.ok() && (*got)[0].ok());
    EXPECT_TRUE(Same(*(*got)[0], o.bytes));
  }
  auto absent = MakeObject(22, 1024);
  auto miss = client.Get({&absent.key, 1});  // asks Redis, which is down: a miss, not an error
  ASSERT_TRUE(miss.ok());
  EXPECT_EQ((*miss)[0].code(), ErrorCode::kNotFound);
  for (int i = 0; i < 100 && stat("remote.errors") < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GE(stat("remote.errors"), 1);

  redis.Start();  // same port, empty
  bool recovered = false;
  for (int i = 0; i < 100 && !recovered; ++i) {
    auto o = MakeObject(100 + i, 4096);
    ASSERT_TRUE((*client.Put({&o.key, 1}, {&o.bytes, 1}))[0].ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    recovered = stat("remote.admits") > 1;
  }
  EXPECT_TRUE(recovered) << "the node did not resume writing to Redis";
  EXPECT_EQ(StopWithSigterm(), 0);
}

// A node given Redis's password (here by PIKV_REDIS_PASSWORD, as a
// deployment should: a flag would show in ps) writes through to a Redis that
// requires it (that it is never printed: DaemonCliTest).
TEST_F(NodeProcessTest, WritesThroughToAPasswordProtectedRedis) {
  testing::RedisServer redis;
  {
    std::string out;
    launch::ChildProcess cli("redis-cli", {"-p", std::to_string(redis.port()), "CONFIG", "SET",
                                           "requirepass", "node pass 1"});
    while (auto line = cli.ReadLine(kTimeout)) out += *line;
    ASSERT_EQ(cli.Wait(kTimeout), 0) << out;
  }
  auto args = Args();
  args.insert(args.end(), {"--redis", redis.address()});
  setenv("PIKV_REDIS_PASSWORD", "node pass 1", 1);
  node_ = StartNode(args);
  unsetenv("PIKV_REDIS_PASSWORD");
  NodeClient client(node_.tcp, kTimeout);
  auto stat = [&](const char* name) { return std::get<int64_t>(client.Stats()->at(name)); };
  auto o = MakeObject(23, 64 << 10);
  ASSERT_TRUE((*client.Put({&o.key, 1}, {&o.bytes, 1}))[0].ok());
  for (int i = 0; i < 100 && stat("remote.admits") < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(stat("remote.admits"), 1);
  EXPECT_EQ(stat("remote.errors"), 0);
  EXPECT_EQ(StopWithSigterm(), 0);
}

TEST(NodeClientTest, DeadNodeIsUnavailableWithinTheDeadline) {
  int port = testing::FreePort();
  NodeClient client("tcp://127.0.0.1:" + std::to_string(port), std::chrono::milliseconds(200));
  auto t0 = std::chrono::steady_clock::now();
  Status s = client.Ping();
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_FALSE(s.ok());
  EXPECT_LT(took, std::chrono::milliseconds(300));
}

}  // namespace
}  // namespace pikv::node
