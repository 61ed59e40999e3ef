// RpcClient::CallAll against a real ROUTER socket that answers out of
// order: every reply lands in its request's place, a stray reply is
// dropped, a reply missing past the deadline fails the call, and a server
// that could not parse a request fails it with the server's reason.
#include "pikv/transport/rpc_client.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <zmq.hpp>

#include "pikv/transport/zmq_frames.h"

namespace pikv {
namespace {

using namespace std::chrono_literals;

// Receives `n` requests, then answers them in reverse order (after a reply
// to a request id no one sent), each reply's value its request's key count;
// `skip` of them (the last received first) go unanswered.
class ReversingServer {
 public:
  ReversingServer(size_t n, size_t skip = 0) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind("tcp://127.0.0.1:*");
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this, n, skip] { Serve(n, skip); });
  }
  ~ReversingServer() { thread_.join(); }
  const std::string& endpoint() const { return endpoint_; }

 private:
  void Serve(size_t n, size_t skip) {
    std::vector<std::pair<zmq::message_t, Header>> got;
    std::vector<zmq::message_t> frames;
    while (got.size() < n) {
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, 5s) == 0) return;
      RecvFrames(socket_, frames);
      auto m = ParseFrames(frames, 1, WireLimits{});
      if (!m.ok()) return;
      got.emplace_back(std::move(frames[0]), m->header);
    }
    auto answer = [&](zmq::message_t& identity, uint64_t id, int64_t value) {
      std::vector<zmq::message_t> routing;
      routing.emplace_back(identity.data(), identity.size());
      Header reply;
      reply.type = MsgType::kExists;
      reply.request_id = id;
      reply.values = {value};
      SendMessage(socket_, routing, reply, {});
    };
    answer(got[0].first, 1000, -1);  // answers nothing this client asked
    std::reverse(got.begin(), got.end());
    for (size_t i = skip; i < got.size(); ++i)
      answer(got[i].first, got[i].second.request_id,
             static_cast<int64_t>(got[i].second.keys.size()));
  }

  zmq::context_t context_;
  zmq::socket_t socket_{context_, zmq::socket_type::router};
  std::string endpoint_;
  std::thread thread_;
};

std::vector<Message> Requests(size_t n) {
  std::vector<Message> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i].header.type = MsgType::kExists;
    out[i].header.keys.assign(i + 1, ChunkKey{i, i});
  }
  return out;
}

TEST(RpcClientTest, CallAllPutsRepliesInTheirRequestsPlaceWhateverOrderTheyCome) {
  ReversingServer server(4);
  RpcClient rpc(server.endpoint());
  auto replies = rpc.CallAll(Requests(4), 5s);
  ASSERT_TRUE(replies.ok()) << replies.status().ToString();
  ASSERT_EQ(replies->size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_EQ((*replies)[i].header.values, std::vector<int64_t>{int64_t(i) + 1});
}

TEST(RpcClientTest, CallAllFailsWhenAReplyNeverComes) {
  ReversingServer server(3, /*skip=*/1);
  RpcClient rpc(server.endpoint());
  auto replies = rpc.CallAll(Requests(3), 300ms);
  EXPECT_EQ(replies.status().code(), ErrorCode::kTimeout);
  // The client goes on: a later call is answered (by no one here: a timeout,
  // not a stale reply taken for it).
  EXPECT_EQ(rpc.Call(Requests(1)[0], 100ms).status().code(), ErrorCode::kTimeout);
}

TEST(RpcClientTest, CallAllFailsWithTheReasonOfARequestTheServerCouldNotParse) {
  zmq::context_t context;
  zmq::socket_t router(context, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.bind("tcp://127.0.0.1:*");
  std::thread serve([&] {
    std::vector<zmq::message_t> frames;
    zmq::pollitem_t item{router.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, 5s) == 0) return;
    RecvFrames(router, frames);
    std::vector<zmq::message_t> routing;
    routing.push_back(std::move(frames[0]));
    Header error;
    error.type = MsgType::kError;
    error.status = ErrorCode::kProtocol;
    error.reason = "header does not decode";
    SendMessage(router, routing, error, {});
  });
  RpcClient rpc(router.get(zmq::sockopt::last_endpoint));
  auto replies = rpc.CallAll(Requests(2), 5s);
  serve.join();
  EXPECT_EQ(replies.status().code(), ErrorCode::kProtocol);
  EXPECT_EQ(replies.status().message(), "header does not decode");
}

}  // namespace
}  // namespace pikv
