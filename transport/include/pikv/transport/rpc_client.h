// RpcClient: request/reply over one ZeroMQ DEALER socket with deadlines.
//
// Call() sends a message and waits for the reply carrying the same request id;
// replies to earlier calls that timed out are discarded when they arrive late.
// A peer that is down or slow yields kUnavailable / kTimeout within the
// deadline, never a hang. An endpoint that does not parse (ParseEndpoint) or
// that ZeroMQ refuses makes every Call return kInvalidArgument; nothing
// throws. With `curve` keys a tcp endpoint is dialled over CURVE (curve.h);
// a server that does not admit them never answers: kUnavailable/kTimeout.
// Not thread-safe: use one RpcClient per thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "pikv/proto/message.h"
#include "pikv/transport/curve.h"

namespace pikv {

class RpcClient {
 public:
  explicit RpcClient(std::string endpoint, WireLimits limits = {},
                     std::optional<CurveClientKeys> curve = std::nullopt);
  ~RpcClient();
  RpcClient(const RpcClient&) = delete;
  RpcClient& operator=(const RpcClient&) = delete;

  // Fills in request_id; returns the reply or why there is none. A reply with
  // a non-ok status is still a reply: check header.status.
  Result<Message> Call(Message request, std::chrono::milliseconds timeout);
  // Sends every request, then collects their replies in whatever order they
  // come, all within `timeout`: a batch sent as several messages is handled
  // by the peer as each arrives, not once all of it has. The replies are in
  // the requests' order, each with its own status (check header.status).
  // A request that cannot be sent, or is not answered in time, fails the
  // whole call; replies still on their way are dropped as late ones.
  Result<std::vector<Message>> CallAll(std::vector<Message> requests,
                                       std::chrono::milliseconds timeout);

  // The next message of a streamed reply (message.h): one raw frame within
  // the payload limit. After any failure the stream is out of step: drop
  // this client.
  Result<SharedBuffer> ReceiveFrame(std::chrono::milliseconds timeout);
  // Sends one frame of a streamed put (message.h), zero-copy, waiting at
  // most `timeout` for room; after a failure, drop this client.
  Status SendFrame(const SharedBuffer& frame, std::chrono::milliseconds timeout);
  // A further reply to an earlier Call (a streamed put's final answer).
  Result<Message> AwaitReply(uint64_t request_id, std::chrono::milliseconds timeout);

  // A new connection (and identity): what a stream left half-way, in either
  // direction, no longer reaches this client.
  void Reset();

  const std::string& endpoint() const { return endpoint_; }
  const std::optional<CurveClientKeys>& curve() const { return curve_; }
  // Ok, or why this client can never connect.
  const Status& status() const { return status_; }

 private:
  void Connect();
  // Sends `request` with the next request id, waiting until `deadline` for
  // a connection.
  Status Send(Message& request, std::chrono::steady_clock::time_point deadline);
  // The next reply of any request id, parsed.
  Result<Message> ReceiveAny(std::chrono::steady_clock::time_point deadline,
                             std::chrono::milliseconds timeout);

  struct Impl;
  std::string endpoint_;
  std::optional<CurveClientKeys> curve_;
  Status status_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pikv
