// NodeServer: the pikv-node agent's serving loop.
//
// One ZeroMQ ROUTER socket bound to every configured endpoint (tcp for peers
// and remote clients, ipc for local clients) feeds a pool of worker threads
// through an in-process proxy. Workers decode each request with the wire
// limits, hand it to the RequestHandler and send the reply; payloads leave
// straight from the CPU arena without a copy. Clients are DEALER sockets:
// frame 0 of what the ROUTER sees is the client's identity, then the header.
// Stop() lets workers finish what they hold, closes the endpoints, drains the
// write-through queues and flushes RocksDB.
// Thread-safety: Start/Stop from one thread; Stats and storage() from any.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "pikv/node/request_handler.h"
#include "pikv/proto/message.h"
#include "pikv/storage/storage_manager.h"

namespace pikv::node {

struct NodeOptions {
  std::string node_id;                 // default: host name
  std::vector<std::string> endpoints;  // e.g. tcp://0.0.0.0:7400, ipc:///run/pikv/node.sock
  int workers = 2;
  WireLimits limits;
  storage::StorageOptions storage;
};

class NodeServer {
 public:
  static Result<std::unique_ptr<NodeServer>> Start(NodeOptions options);
  ~NodeServer();  // Stop()

  // Endpoints as bound, with wildcard ports resolved (tcp://127.0.0.1:*).
  const std::vector<std::string>& endpoints() const { return endpoints_; }
  const std::string& node_id() const { return options_.node_id; }
  void Stop();

  RequestHandler& handler() { return *handler_; }
  storage::StorageManager& storage() { return *storage_; }

 private:
  struct Sockets;
  NodeServer() = default;
  void WorkerLoop(int index);

  NodeOptions options_;
  std::vector<std::string> endpoints_;
  std::unique_ptr<storage::StorageManager> storage_;
  std::unique_ptr<RequestHandler> handler_;
  std::unique_ptr<Sockets> sockets_;
  bool stopped_ = false;
};

}  // namespace pikv::node
