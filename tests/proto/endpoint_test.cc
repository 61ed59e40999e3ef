#include "pikv/proto/endpoint.h"

#include <gtest/gtest.h>

#include "pikv/transport/rpc_client.h"

namespace pikv {
namespace {

using namespace std::chrono_literals;

TEST(EndpointTest, AcceptsWhatPikvConnectsTo) {
  for (const char* ok :
       {"tcp://127.0.0.1:7400", "tcp://node-a.cluster.local:1", "tcp://[::1]:65535",
        "tcp://[fe80::1]:80", "ipc:///run/pikv/node.sock", "ipc://rel/node.sock"}) {
    auto e = ParseEndpoint(ok);
    ASSERT_TRUE(e.ok()) << ok << ": " << e.status().ToString();
    EXPECT_EQ(e->ToString(), ok);
  }
  EXPECT_EQ(ParseEndpoint("tcp://h:7")->port, 7);
  EXPECT_EQ(ParseEndpoint("tcp://h:7")->host, "h");
}

TEST(EndpointTest, RefusesEverythingElse) {
  const std::string too_long = "tcp://" + std::string(300, 'a') + ":1";
  const std::string long_path = "ipc:///" + std::string(120, 'p');
  for (const std::string& bad : std::vector<std::string>{"",
                                                         "garbage",
                                                         "tcp://",
                                                         "ipc://",
                                                         "udp://1.2.3.4:5",
                                                         "tcp://h",
                                                         "tcp://:7",
                                                         "tcp://h:0",
                                                         "tcp://h:65536",
                                                         "tcp://h:-1",
                                                         "tcp://h:7x",
                                                         "tcp://*:7",
                                                         "tcp://a;b:1",
                                                         "tcp://[zz]:1",
                                                         "tcp://[::1:1",
                                                         "tcp://h h:1",
                                                         "ipc://a b",
                                                         "ipc://*",
                                                         "inproc://x",
                                                         "pgm://e;1.2.3.4:5",
                                                         std::string("tcp://h\0x:1", 11),
                                                         too_long,
                                                         long_path}) {
    EXPECT_EQ(ParseEndpoint(bad).code(), ErrorCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(ParseTcpEndpoint("ipc:///x").code(), ErrorCode::kInvalidArgument);
}

TEST(EndpointTest, Utf8Validation) {
  EXPECT_TRUE(IsValidUtf8("plain"));
  EXPECT_TRUE(IsValidUtf8("gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x98\x80"));
  for (const std::string& bad : std::vector<std::string>{
           "\xff", "\xc3", "\xc3\x28", "\xe2\x82", "\xc0\xaf" /* overlong */,
           "\xed\xa0\x80" /* surrogate */, "\xf4\x90\x80\x80" /* > U+10FFFF */}) {
    EXPECT_FALSE(IsValidUtf8(bad)) << bad.size();
  }
}

TEST(EndpointTest, NodeIdsAndHostNames) {
  EXPECT_TRUE(CheckNodeId("node-a_1.rack:2@dc").ok());
  for (const std::string& bad : std::vector<std::string>{"", "a b", "a\nb", "a\"b", "a\\b",
                                                         "\xc3\xbc", std::string(129, 'a')})
    EXPECT_FALSE(CheckNodeId(bad).ok()) << bad;
  EXPECT_TRUE(CheckHostName("host-1.example.com").ok());
  EXPECT_TRUE(CheckHostName("fe80::1").ok());
  EXPECT_FALSE(CheckHostName("h\xc3\x28").ok());
  EXPECT_FALSE(CheckHostName(std::string(254, 'h')).ok());
}

// A client given an unusable address (from a peer, a registration, a config)
// reports it on every call; nothing throws.
TEST(EndpointTest, RpcClientWithAnUnusableEndpointFailsEveryCall) {
  for (const char* bad : {"garbage", "tcp://", "ipc://", "udp://1.2.3.4:5"}) {
    RpcClient rpc(bad);
    EXPECT_EQ(rpc.status().code(), ErrorCode::kInvalidArgument) << bad;
    EXPECT_EQ(rpc.Call(Message{}, 100ms).code(), ErrorCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace pikv
