// ControllerHandler: what the controller does with each message, without
// sockets. The server loop (controller_server.cc) receives frames and sends
// what this returns; tests and fuzzers call it directly.
//
// Handle() takes one request as frames arrived from a peer (its ROUTER
// identity, who sent it as CURVE authenticated it, the header frame, the
// number of payload frames), decodes it
// under the wire limits, applies it to the ClusterState and returns what to
// send: the reply to the requester, if any, and the commands it causes for
// nodes (kResync after a sequence gap, clear/pin/unpin/evict for admin
// requests), each addressed by ROUTER identity. Nodes are reached over the
// connections they opened; a node's identity is learned when it registers
// or heartbeats and forgotten with the node. With security on, only node
// <id>'s key speaks for node <id> (register, heartbeat, events, inventory,
// deregister) and only an admin key changes nodes (clear, pin, unpin,
// evict); anything else is refused with kPermissionDenied and counted in
// rejected(). The trusted sender (nullptr: security off) may do anything.
// Nothing a peer sends throws.
// Thread-safety: one thread (the server's) calls Handle and Tick.
#pragma once

#include <atomic>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "pikv/controller/cluster_state.h"
#include "pikv/proto/curve.h"

namespace pikv::controller {

class ControllerHandler {
 public:
  struct Outgoing {
    std::string identity;  // ROUTER identity of the recipient
    Header header;
    std::vector<SharedBuffer> payloads;  // an admin reply's document (proto/admin_wire.h)
  };

  ControllerHandler(ClusterState& state, WireLimits limits) : state_(state), limits_(limits) {}

  std::vector<Outgoing> Handle(const std::string& identity, const CurvePeer* sender,
                               std::span<const uint8_t> header, size_t payload_frames,
                               Clock::time_point now);
  // Ages node lifecycles (every 100 ms from the server).
  void Tick(Clock::time_point now);

  uint64_t rejected() const { return rejected_; }

 private:
  std::vector<Outgoing> Reject(const std::string& identity, const Header* request,
                               const Status& why);
  void Apply(const std::string& identity, const Header& h, Clock::time_point now,
             std::vector<Outgoing>& out);
  // Ok, or why `sender` may not send `h`.
  static Status Authorize(const CurvePeer* sender, const Header& h);

  ClusterState& state_;
  const WireLimits limits_;
  std::map<std::string, std::string> identities_;  // node id -> ROUTER identity of its reporter
  std::atomic<uint64_t> rejected_{0};
};

}  // namespace pikv::controller
