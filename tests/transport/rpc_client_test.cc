// RpcClient::CallAll against a real ROUTER socket that answers out of
// order: every reply lands in its request's place, a stray reply is
// dropped, a reply missing past the deadline fails the call and, arriving
// late, is not taken for a later call's, and a server that could not parse
// a request fails it with the server's reason.
#include "pikv/transport/rpc_client.h"

#include <gtest/gtest.h>

#include <future>
#include <optional>
#include <thread>
#include <zmq.hpp>

#include "pikv/transport/zmq_frames.h"

namespace pikv {
namespace {

using namespace std::chrono_literals;

// Receives `n` requests, then answers them in reverse order (after a reply
// to a request id no one sent), each reply's value its request's key count.
// With `late`, the request received last is answered only once `late` is
// ready, and then one more request is received and answered.
class ReversingServer {
 public:
  explicit ReversingServer(size_t n, std::shared_future<void> late = {}) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind("tcp://127.0.0.1:*");
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this, n, late] { Serve(n, late); });
  }
  ~ReversingServer() { thread_.join(); }
  const std::string& endpoint() const { return endpoint_; }

 private:
  using Request = std::pair<zmq::message_t, Header>;
  bool Receive(std::vector<Request>& got) {
    std::vector<zmq::message_t> frames;
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, 5s) == 0) return false;
    RecvFrames(socket_, frames);
    auto m = ParseFrames(frames, 1, WireLimits{});
    if (!m.ok()) return false;
    got.emplace_back(std::move(frames[0]), m->header);
    return true;
  }
  void Answer(Request& r, std::optional<uint64_t> id = std::nullopt) {
    std::vector<zmq::message_t> routing;
    routing.emplace_back(r.first.data(), r.first.size());
    Header reply;
    reply.type = MsgType::kExists;
    reply.request_id = id.value_or(r.second.request_id);
    reply.values = {static_cast<int64_t>(r.second.keys.size())};
    SendMessage(socket_, routing, reply, {});
  }
  void Serve(size_t n, std::shared_future<void> late) {
    std::vector<Request> got;
    while (got.size() < n)
      if (!Receive(got)) return;
    Answer(got[0], 1000);                      // answers nothing this client asked
    const size_t held = late.valid() ? 1 : 0;  // the request received last
    for (size_t i = n - held; i-- > 0;) Answer(got[i]);
    if (!late.valid() || late.wait_for(5s) != std::future_status::ready) return;
    Answer(got[n - 1]);  // after its call gave up
    if (Receive(got)) Answer(got.back());
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

TEST(RpcClientTest, AReplyMissingFailsTheCallAndArrivingLateIsNotTakenForTheNext) {
  std::promise<void> gave_up;
  ReversingServer server(3, gave_up.get_future().share());
  RpcClient rpc(server.endpoint());
  auto replies = rpc.CallAll(Requests(3), 1s);
  EXPECT_EQ(replies.status().code(), ErrorCode::kTimeout);
  gave_up.set_value();
  // The reply to the batch's third request (3 keys) now arrives first; the
  // next call's own reply (1 key) is the one it returns.
  auto next = rpc.Call(Requests(1)[0], 5s);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->header.values, std::vector<int64_t>{1});
}

TEST(RpcClientTest, CallAllFailsWithTheReasonOfARequestTheServerCouldNotParse) {
  zmq::context_t context;
  zmq::socket_t router(context, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.bind("tcp://127.0.0.1:*");
  const std::string endpoint = router.get(zmq::sockopt::last_endpoint);
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
  RpcClient rpc(endpoint);
  auto replies = rpc.CallAll(Requests(2), 5s);
  serve.join();
  EXPECT_EQ(replies.status().code(), ErrorCode::kProtocol);
  EXPECT_EQ(replies.status().message(), "header does not decode");
}

}  // namespace
}  // namespace pikv
