// AdminClient: typed calls to a pikv-controller, for the client library, the
// CLI, launchers and tests. Every call has a deadline; a controller that does
// not answer is kUnavailable or kTimeout. The controller may be a spec of
// several (a list: transport/controller_finder.h; etcd://...: given as
// coord::FindControllers(spec)): calls go to the leader, follow a standby's kNotLeader to it within
// the deadline, and move on after one that did not answer (until one has answered, each listed
// controller gets its share of the deadline). Not thread-safe: one per thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "pikv/proto/control_wire.h"
#include "pikv/proto/location.h"
#include "pikv/proto/message.h"
#include "pikv/transport/controller_finder.h"
#include "pikv/transport/rpc_client.h"

namespace pikv::rpc {

// The controller's health document (proto/admin_wire.h), typed.
struct ClusterHealth {
  bool ok = false;  // status "ok": nodes alive and none suspect
  uint64_t nodes_alive = 0, nodes_suspect = 0, nodes_dead = 0;
};

// What an admin request names besides keys, where its type reads it.
struct AdminArgs {
  std::string node;    // clear, pin, unpin, evict: the one node (empty: every node)
  std::string host;    // locate: the asker's host (copies there come first)
  std::string engine;  // revoke: the engine refused
  // score: each key's tokens (empty: 1 each) and the candidate nodes
  std::vector<int64_t> tokens;
  ScoreRequest score;
};

class AdminClient {
 public:
  // The controllers `finder` follows; its error, if it is one, is every
  // call's answer.
  explicit AdminClient(Result<std::shared_ptr<ControllerFinder>> finder,
                       std::chrono::milliseconds timeout = std::chrono::seconds(2),
                       std::optional<CurveClientKeys> curve = std::nullopt);
  // A listed spec: one endpoint or several (ControllerFinder::Parse).
  explicit AdminClient(const std::string& controller,
                       std::chrono::milliseconds timeout = std::chrono::seconds(2),
                       std::optional<CurveClientKeys> curve = std::nullopt)
      : AdminClient(ControllerFinder::Parse(controller), timeout, std::move(curve)) {}
  ~AdminClient();

  // Replicas per key, cheapest first for a client on `host`.
  Result<std::vector<std::vector<Replica>>> Locate(const std::vector<ChunkKey>& keys,
                                                   const std::string& host = {});
  Result<ClusterHealth> Health();
  // Reports keys an audit found wrong (kAuditMismatch), with the writer and
  // payload checksum of each object fetched; returns how many the
  // controller dropped (it refuses reports past a reporter's rate).
  using MismatchReport = ::pikv::MismatchReport;  // proto/control_wire.h
  Result<uint64_t> ReportMismatch(const std::vector<MismatchReport>& reports);
  // An admin request (kAdmin*, kScore, or kLocate answered as a document); returns
  // the reply's JSON document, at most admin::kMaxAdminReplyBytes.
  Result<std::string> Json(MsgType type, const std::vector<ChunkKey>& keys = {},
                           const AdminArgs& args = {});
  // The controller the last call went to (empty before any).
  std::string endpoint() const { return rpc_ ? rpc_->endpoint() : std::string(); }

 private:
  // The leader's reply to `request`, within the deadline.
  Result<Message> Call(const Message& request);

  std::shared_ptr<ControllerFinder> finder_;  // null: the spec did not parse
  Status invalid_;                            // why, then
  std::optional<CurveClientKeys> curve_;
  std::unique_ptr<RpcClient> rpc_;  // to the controller last used
  bool confirmed_ = false;          // it answered the last call as leader
  bool answered_ = false;           // a controller has answered once
  std::chrono::milliseconds timeout_;
};

}  // namespace pikv::rpc
