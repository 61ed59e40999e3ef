// AdminClient: typed calls to a pikv-controller, for the CLI, tests and the
// client library. Every call has a deadline; a controller that does not
// answer is kUnavailable or kTimeout. Not thread-safe: one per thread.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "pikv/controller/cluster_state.h"
#include "pikv/proto/rpc_client.h"

namespace pikv::controller {

class AdminClient {
 public:
  explicit AdminClient(std::string endpoint,
                       std::chrono::milliseconds timeout = std::chrono::seconds(2));

  // Replicas per key, cheapest first for a client on `host`.
  Result<std::vector<std::vector<Replica>>> Locate(const std::vector<ChunkKey>& keys,
                                                   const std::string& host = {});
  // An admin request (kAdmin*, kLocate with json); returns the reply's JSON.
  Result<std::string> Json(MsgType type, const std::vector<ChunkKey>& keys = {},
                           Fields fields = {});

 private:
  RpcClient rpc_;
  std::chrono::milliseconds timeout_;
};

}  // namespace pikv::controller
