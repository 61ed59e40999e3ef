// ZeroCopyServer: the node's side of the zero-copy channel to the clients on
// its own host (transport/local_channel.h).
//
// On connect a client is sent the CPU arena's memfd (kShareHello) and maps
// it. Then, per request: kLease lends the objects of a batch in place
// (offset and size into the arena, under one lease, LeaseTable), copying up
// into the CPU tier first what only the disk tier holds (on the client's own
// thread, below); keys in neither are misses that the client fetches by copy
// over ZeroMQ (from the remote tier, or peers).
// kReserve hands out arena space for a batch of objects, which the client
// fills through its own mapping; kCommit verifies each exactly as a put is
// verified and admits it without a copy (one round trip each per batch); kWritten marks let the
// node hash a reservation while it is being filled (seal_ahead.h). kRelease gives leases and
// reservations back. Only processes of the node's own user may connect (SO_PEERCRED; the socket
// file is 0600): such a process could read and write the node's memory
// through ptrace anyway, so lending it the arena grants nothing new.
// One thread accepts and expires leases; each client has a thread of its own
// (blocking reads), so a slow or silent client stalls no one else. At most
// `max_clients` at once; the rest are turned away.
// Thread-safety: Start and Stop from one thread.
#pragma once

#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "lease_table.h"
#include "pikv/node/node_server.h"
#include "pikv/node/node_stats.h"

namespace pikv::node {

class ZeroCopyServer {
 public:
  static Result<std::unique_ptr<ZeroCopyServer>> Start(const ZeroCopyOptions& options,
                                                       storage::StorageManager& storage,
                                                       const WireLimits& limits);
  ~ZeroCopyServer();  // Stop()
  void Stop();

  const std::string& path() const { return path_; }
  const stats::ZeroCopyCounters& counters() const { return counters_; }
  LeaseTable::Stats leases() const { return leases_.stats(); }

 private:
  struct Connection {
    int fd = -1;
    uint64_t id = 0;
    std::thread thread;
    std::atomic<bool> done{false};
  };
  ZeroCopyServer(storage::StorageManager& storage, const ZeroCopyOptions& options,
                 const WireLimits& limits);
  void AcceptLoop();
  void Serve(Connection& c);
  // The reply to one request; nullopt for kRelease (it has none).
  std::optional<Header> Handle(uint64_t client, const Header& request);
  Header HandleLease(uint64_t client, const Header& request);
  Header HandleReserve(uint64_t client, const Header& request);
  Header HandleCommit(uint64_t client, const Header& request);
  // One object of a batch: its reservation id and offset in the arena; the
  // outcome of its commit.
  Result<std::pair<uint64_t, uint64_t>> ReserveOne(uint64_t client, int64_t size,
                                                   std::chrono::steady_clock::time_point now);
  Status CommitOne(uint64_t client, const ChunkKey& key, int64_t reservation, bool seal);
  void HandleWritten(uint64_t client, const Header& request);
  void ReapFinished();

  storage::StorageManager& storage_;
  ZeroCopyOptions options_;
  WireLimits limits_;
  LeaseTable leases_;
  std::string path_;
  int listen_fd_ = -1;
  std::thread acceptor_;
  std::atomic<bool> stopping_{false};
  std::mutex connections_mu_;
  std::list<Connection> connections_;  // guarded by connections_mu_
  uint64_t next_client_ = 1;           // acceptor thread only
  stats::ZeroCopyCounters counters_;
};

}  // namespace pikv::node
