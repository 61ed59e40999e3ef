// ControllerServer: the pikv-controller process's serving loop.
//
// One thread owns a ZeroMQ ROUTER socket on which nodes register, heartbeat
// and report events, and clients and the CLI locate and administer. What each
// message means is ControllerHandler's business (socket-free); this loop only
// receives, hands over and sends. The same thread ticks node lifecycles every 100 ms and
// sends commands to nodes over the connections they opened (kResync after a
// sequence gap; clear, pin, unpin, evict for admin requests), so the
// controller never dials a node and never sits on the data path. A separate
// thread serves read-only HTTP (/metrics, /healthz, /nodes, /stats, /locate).
// With etcd endpoints it is one of several controllers: a LeaderElection
// decides whether it leads; standing by, it answers every request with
// kNotLeader naming the leader, and its HTTP /locate with 503.
// Thread-safety: Start/Stop from one thread; state() is thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "pikv/controller/cluster_state.h"
#include "pikv/controller/controller_handler.h"
#include "pikv/controller/leader_election.h"
#include "pikv/transport/curve.h"

namespace pikv::controller {

struct ControllerOptions {
  std::string endpoint = "tcp://127.0.0.1:7300";
  std::string http = "127.0.0.1:7380";  // host:port for HTTP; empty = off; port 0 = any
  ClusterState::Options lifecycle;
  WireLimits limits;
  // CURVE on a tcp endpoint (transport/curve.h); null: security off.
  std::shared_ptr<const CurveSecurity> security;
  // Standbys (docs/operations.md): the etcd members holding the leadership
  // of `cluster`, and how to reach them; empty: this controller runs alone.
  coord::EtcdAccess etcd;
  std::string cluster = "pikv";
  std::chrono::milliseconds lease_ttl{3000};
  // Without etcd: the file keeping revocations and confirmed audit counts
  // across restarts (FileTrustRecord); empty: memory only.
  std::string trust_file;
  // The endpoint and HTTP address others reach this controller at (default:
  // as bound; a wildcard address must be given here).
  std::string advertise;
  std::string advertise_http;
};

class ControllerServer {
 public:
  static Result<std::unique_ptr<ControllerServer>> Start(ControllerOptions options);
  ~ControllerServer();  // Stop()

  const std::string& endpoint() const { return endpoint_; }
  const std::string& http_address() const { return http_address_; }  // empty when off
  ClusterState& state() { return *state_; }
  // This controller's part in leadership (role "alone" without etcd).
  Leadership leadership() const;
  uint64_t rejected() const;
  void Stop();

 private:
  struct Loop;
  ControllerServer() = default;
  Status StartHttp(Loop& loop);
  void Serve();

  ControllerOptions options_;
  std::string endpoint_;
  std::string http_address_;
  std::unique_ptr<ClusterState> state_;
  std::unique_ptr<LeaderElection> election_;  // null: alone
  std::unique_ptr<ControllerHandler> handler_;
  std::unique_ptr<Loop> loop_;
};

}  // namespace pikv::controller
