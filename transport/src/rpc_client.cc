#include "pikv/transport/rpc_client.h"

#include "pikv/proto/endpoint.h"
#include "pikv/transport/zmq_frames.h"

namespace pikv {

using Clock = std::chrono::steady_clock;

struct RpcClient::Impl {
  zmq::socket_t socket{ClientContext(), zmq::socket_type::dealer};
  WireLimits limits;
  uint64_t next_id = 1;
  std::vector<zmq::message_t> frames;
};

RpcClient::RpcClient(std::string endpoint, WireLimits limits, std::optional<CurveClientKeys> curve)
    : endpoint_(std::move(endpoint)), curve_(std::move(curve)), impl_(std::make_unique<Impl>()) {
  impl_->limits = limits;
  // The endpoint may come from a peer or a config file: a bad one is this
  // client's error, never an exception out of ZeroMQ.
  if (auto parsed = ParseEndpoint(endpoint_); !parsed.ok()) {
    status_ = parsed.status();
    return;
  }
  Connect();
}

void RpcClient::Connect() {
  zmq::socket_t& socket = impl_->socket;
  socket.set(zmq::sockopt::linger, 0);
  // Queue nothing for peers that are not connected: a dead node makes the
  // send wait (bounded by the deadline) instead of silently buffering.
  socket.set(zmq::sockopt::immediate, 1);
  socket.set(zmq::sockopt::reconnect_ivl, 50);
  socket.set(zmq::sockopt::reconnect_ivl_max, 1000);
  if (curve_ && UsesCurve(endpoint_)) DialCurve(socket.handle(), *curve_);
  try {
    socket.connect(endpoint_);
  } catch (const zmq::error_t& e) {
    status_ = InvalidArgument("connect " + endpoint_ + ": " + e.what());
  }
}

void RpcClient::Reset() {
  if (!status_.ok()) return;
  impl_->socket = zmq::socket_t(ClientContext(), zmq::socket_type::dealer);
  Connect();
}

RpcClient::~RpcClient() = default;

namespace {

std::chrono::milliseconds Left(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

// A kError reply with id 0 answers a request the peer could not parse.
bool Unparsed(const Header& h) { return h.type == MsgType::kError && h.request_id == 0; }

}  // namespace

Status RpcClient::Send(Message& request, Clock::time_point deadline) {
  if (!status_.ok()) return status_;
  request.header.request_id = impl_->next_id++;
  zmq::pollitem_t out_item{impl_->socket.handle(), 0, ZMQ_POLLOUT, 0};
  try {
    if (zmq::poll(&out_item, 1, Left(deadline)) == 0) {
      return Unavailable("no connection to " + endpoint_ +
                         (curve_ && UsesCurve(endpoint_) ? " (or it refused this CURVE key)" : ""));
    }
  } catch (const zmq::error_t& e) {
    return IoError(e.what());
  }
  std::vector<zmq::message_t> no_routing;
  if (!SendMessage(impl_->socket, no_routing, request.header, request.payloads,
                   /*dontwait=*/true)) {
    return Unavailable("send to " + endpoint_ + " failed");
  }
  return Status::Ok();
}

Result<Message> RpcClient::Call(Message request, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  if (Status sent = Send(request, deadline); !sent.ok()) return sent;
  return AwaitReply(request.header.request_id, Left(deadline));
}

Result<std::vector<Message>> RpcClient::CallAll(std::vector<Message> requests,
                                                std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const uint64_t first = impl_->next_id;  // ids are given in order, one each
  for (Message& request : requests) {
    if (Status sent = Send(request, deadline); !sent.ok()) return sent;
  }
  std::vector<Message> replies(requests.size());  // request_id 0: not answered yet
  for (size_t pending = requests.size(); pending > 0;) {
    auto reply = ReceiveAny(deadline, timeout);
    if (!reply.ok()) return reply.status();
    if (Unparsed(reply->header)) {
      if (reply->header.status == ErrorCode::kOk)
        return ProtocolError("an error reply without an error");
      return Status(reply->header.status, reply->header.reason);
    }
    const uint64_t i = reply->header.request_id - first;  // wraps past the batch: a late reply
    if (i >= requests.size() || replies[i].header.request_id != 0) continue;
    replies[i] = std::move(*reply);
    pending--;
  }
  return replies;
}

Result<Message> RpcClient::ReceiveAny(Clock::time_point deadline,
                                      std::chrono::milliseconds timeout) {
  zmq::pollitem_t in_item{impl_->socket.handle(), 0, ZMQ_POLLIN, 0};
  while (true) {
    const auto left = Left(deadline);
    try {
      if (left.count() <= 0 || zmq::poll(&in_item, 1, left) == 0) {
        return Timeout("no reply from " + endpoint_ + " within " + std::to_string(timeout.count()) +
                       " ms");
      }
    } catch (const zmq::error_t& e) {
      return IoError(e.what());
    }
    if (RecvFrames(impl_->socket, impl_->frames, zmq::recv_flags::dontwait))
      return ParseFrames(impl_->frames, 0, impl_->limits);
  }
}

Result<Message> RpcClient::AwaitReply(uint64_t request_id, std::chrono::milliseconds timeout) {
  if (!status_.ok()) return status_;
  const auto deadline = Clock::now() + timeout;
  while (true) {
    auto reply = ReceiveAny(deadline, timeout);
    if (!reply.ok()) return reply.status();
    if (reply->header.request_id != request_id && !Unparsed(reply->header))
      continue;  // a late reply
    return reply;
  }
}

Status RpcClient::SendFrame(const SharedBuffer& frame, std::chrono::milliseconds timeout) {
  if (!status_.ok()) return status_;
  zmq::pollitem_t out_item{impl_->socket.handle(), 0, ZMQ_POLLOUT, 0};
  try {
    if (zmq::poll(&out_item, 1, timeout) == 0)
      return Timeout("stream to " + endpoint_ + " stalled for " + std::to_string(timeout.count()) +
                     " ms");
    zmq::message_t m = ToFrame(frame);
    if (!impl_->socket.send(m, zmq::send_flags::dontwait))
      return Unavailable("send to " + endpoint_ + " failed");
  } catch (const zmq::error_t& e) {
    return IoError(e.what());
  }
  return Status::Ok();
}

Result<SharedBuffer> RpcClient::ReceiveFrame(std::chrono::milliseconds timeout) {
  if (!status_.ok()) return status_;
  // Mid-stream the next frame has usually arrived: poll only when it has not.
  if (!RecvFrames(impl_->socket, impl_->frames, zmq::recv_flags::dontwait)) {
    zmq::pollitem_t in_item{impl_->socket.handle(), 0, ZMQ_POLLIN, 0};
    try {
      if (zmq::poll(&in_item, 1, timeout) == 0)
        return Timeout("stream from " + endpoint_ + " stalled for " +
                       std::to_string(timeout.count()) + " ms");
    } catch (const zmq::error_t& e) {
      return IoError(e.what());
    }
    if (!RecvFrames(impl_->socket, impl_->frames, zmq::recv_flags::dontwait))
      return IoError("receive from " + endpoint_ + " failed");
  }
  if (impl_->frames.size() != 1) return ProtocolError("a stream message must be one frame");
  if (impl_->frames[0].size() > impl_->limits.max_payload_bytes)
    return TooLarge("stream frame over the payload limit");
  return FromFrame(std::move(impl_->frames[0]));
}

}  // namespace pikv
