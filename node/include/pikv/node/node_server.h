// NodeServer: the pikv-node agent's serving loop.
//
// One ZeroMQ ROUTER socket, bound to every configured endpoint (tcp for peers
// and remote clients, ipc for local clients), is owned by the server thread.
// It decodes each request under the wire limits and answers on the spot what
// cannot block (CPU-tier GET hits, local EXISTS, pins, stats, ping): the hot
// path has no thread hop beyond ZeroMQ's own I/O thread. Everything else
// (disk or Redis reads, PUT verification and copy, DELETE) goes to a pool of
// worker threads, whose replies come back over an inproc PULL socket for the
// server thread to send. Payloads leave straight from the CPU arena without a
// copy. Clients are DEALER sockets: frame 0 of what the ROUTER sees is the
// client's identity, then the header.
// With max_in_flight requests at the workers the server stops reading, so a
// flood of large PUTs backs up into the senders instead of node memory.
// P2P pulls wait on peers, so they have their own threads and their own
// bound (max_pulls_in_flight, beyond which a pull is answered kRetry at
// once): slow peers never delay a local request. Pulls resolve their peers
// through the controller (see puller.h), so a node without a reporter
// refuses them.
// Stop() stops reading requests, waits for in-flight ones to be answered,
// stops the workers, drains the write-through queues and flushes RocksDB.
// Thread-safety: Start and Stop from one thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pikv/node/reporter.h"
#include "pikv/node/request_handler.h"
#include "pikv/proto/message.h"
#include "pikv/storage/storage_manager.h"

namespace zmq {
class message_t;
}

namespace pikv::node {

class JobQueue;
class ZeroCopyServer;

// The zero-copy channel for clients on this host (see src/zero_copy_server.h).
struct ZeroCopyOptions {
  bool enabled = true;
  // Its unix socket; empty: beside the first ipc endpoint (ZeroCopySocketFor),
  // and off when there is none.
  std::string path;
  // How long a client may hold a lent object or a reservation; the client is
  // told, and stops using it before then.
  std::chrono::milliseconds lease_ttl{30000};
  uint64_t max_client_bytes = 0;  // arena bytes one client may hold; 0: half the arena
  int max_clients = 64;
  // Who the local clients are (NodeOptions::tenant, no writer; set by
  // NodeServer::Start): what they may read and store.
  storage::PutIdentity identity;
};

struct NodeOptions {
  std::string node_id;                 // default: host name
  std::vector<std::string> endpoints;  // e.g. tcp://0.0.0.0:7400, ipc:///run/pikv/node.sock
  int workers = 2;
  // Requests queued for or held by workers before the server stops reading
  // new ones (backpressure through ZeroMQ to the sender). Bounds memory to
  // about (max_in_flight + receive HWM) x the largest object.
  int max_in_flight = 8;
  // P2P pulls run on threads of their own (they wait on other machines);
  // past max_pulls_in_flight a pull is answered kRetry at once.
  int pull_workers = 2;
  int max_pulls_in_flight = 16;
  // Frame size a pull asks its peer to stream in (message.h); 0: unstreamed.
  uint64_t pull_stream_frame = 1 << 20;
  std::string http;  // host:port for /metrics and /healthz; empty = off; port 0 = any
  WireLimits limits;
  storage::StorageOptions storage;
  // Set to report to a controller. Empty tcp/ipc/node_id/host are filled in
  // from the bound endpoints and the node's own id and host name; a tcp
  // endpoint bound to a wildcard (0.0.0.0, [::]) is advertised under the host.
  std::optional<ReporterOptions> reporter;
  ZeroCopyOptions zero_copy;
  // CURVE on tcp endpoints and on the node's own connections to the
  // controller and peers (transport/curve.h); null: security off. With it on,
  // clear, delete, pin and unpin need the admin role (or ipc: the node's
  // own user).
  std::shared_ptr<const CurveSecurity> security;
  // The tenant of callers without a CURVE identity (ipc clients; every
  // client with security off): they read and write only its objects
  // (proto/owner.h), and their stores keep the writer the object names
  // (no key proves a name). Engines with keys have their own.
  std::string tenant;
};

class RevocationSweeper;

class NodeServer {
 public:
  static Result<std::unique_ptr<NodeServer>> Start(NodeOptions options);
  ~NodeServer();  // Stop()

  // Endpoints as bound, with wildcard ports resolved (tcp://127.0.0.1:*).
  const std::vector<std::string>& endpoints() const { return endpoints_; }
  const std::string& node_id() const { return options_.node_id; }
  const std::string& http_address() const { return http_address_; }
  // The zero-copy channel's socket; empty when it is off.
  const std::string& zero_copy_path() const;
  void Stop();

 private:
  struct Loop;
  NodeServer();
  // Start's steps, in order.
  Status Bind(Loop& loop);  // the ZAP handler, the frontend's endpoints, the reply sockets
  void AddStatsSources(Loop& loop);
  Status StartZeroCopy();
  void StartReporter();
  Status StartHttp();
  void StartThreads();  // workers, pull workers, the server loop
  void ServeLoop();
  void WorkerLoop(JobQueue& jobs, const char* replies, int index);
  // Decodes one request; returns the reply now, or nullopt if it was queued.
  std::optional<Message> Dispatch(std::vector<zmq::message_t>& frames);
  // Refuses `engine` from now on, and drops what it wrote from this node's
  // tiers (and from Redis with `shared_tier`), once, off the caller's
  // thread (RevocationSweeper).
  void Revoke(const std::string& engine, bool shared_tier);
  bool Sweep(const std::string& engine, bool shared_tier);
  // What the node lets `sender` (SenderOf) see and write.
  Caller CallerOf(const CurvePeer* sender, MsgType type) const;

  NodeOptions options_;
  std::vector<std::string> endpoints_;
  std::string http_address_;
  std::unique_ptr<storage::StorageManager> storage_;
  std::unique_ptr<RequestHandler> handler_;
  std::unique_ptr<EventQueue> events_;
  std::unique_ptr<Reporter> reporter_;
  std::unique_ptr<ZeroCopyServer> zero_copy_;
  std::unique_ptr<Loop> loop_;
  // Engines refused: the keyring's `revoked` lines and `pikv admin revoke`.
  std::shared_ptr<Revocations> revoked_ = std::make_shared<Revocations>();
  std::atomic<uint64_t> revocations_{0}, revoked_objects_{0}, revoked_refused_{0};
  std::unique_ptr<RevocationSweeper> sweeper_;  // uses storage_: stopped before it
  bool stopped_ = false;
};

}  // namespace pikv::node
