// AdminClient: typed calls to a pikv-controller, for the client library, the
// CLI, launchers and tests. Every call has a deadline; a controller that does
// not answer is kUnavailable or kTimeout. Not thread-safe: one per thread.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "pikv/proto/location.h"
#include "pikv/proto/message.h"
#include "pikv/proto/rpc_client.h"

namespace pikv::rpc {

// The controller's health document (proto/admin_wire.h), typed.
struct ClusterHealth {
  bool ok = false;  // status "ok": nodes alive and none suspect
  uint64_t nodes_alive = 0, nodes_suspect = 0, nodes_dead = 0;
};

class AdminClient {
 public:
  explicit AdminClient(std::string endpoint,
                       std::chrono::milliseconds timeout = std::chrono::seconds(2),
                       std::optional<CurveClientKeys> curve = std::nullopt);

  // Replicas per key, cheapest first for a client on `host`.
  Result<std::vector<std::vector<Replica>>> Locate(const std::vector<ChunkKey>& keys,
                                                   const std::string& host = {});
  Result<ClusterHealth> Health();
  // An admin request (kAdmin*, or kLocate answered as a document); returns
  // the reply's JSON document, at most admin::kMaxAdminReplyBytes.
  Result<std::string> Json(MsgType type, const std::vector<ChunkKey>& keys = {},
                           Fields fields = {});

 private:
  RpcClient rpc_;
  std::chrono::milliseconds timeout_;
};

}  // namespace pikv::rpc
