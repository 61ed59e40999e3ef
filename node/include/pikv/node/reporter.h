// Reporter: keeps the controller's picture of this node current.
//
// Tier events land in a bounded queue through OnEvents, which never blocks
// and never allocates beyond the bound: on overflow the queue is marked dirty
// and the reporter sends a full inventory instead. A thread with one DEALER
// socket to the controller:
//   - registers (node id, endpoints, capacities, this process's incarnation)
//     and then sends the full inventory (CPU and disk keys, in parts);
//   - sends queued events in batches, when `batch_events` are waiting or the
//     oldest has waited `batch_delay`, each batch with the next sequence number;
//   - heartbeats every `heartbeat_interval` with the node's stats; a reply
//     saying "unknown node" or carrying a new controller epoch makes it
//     register again after a random jitter (so a controller restart does not
//     draw every node at once) and resend its inventory;
//   - executes what the controller sends: kResync, kClear, kPin, kUnpin,
//     kDelete; a heartbeat reply with HeartbeatReply::resync (inventory overdue)
//     and a kError reply (the controller refused a message) also resend the
//     inventory, so nothing the controller missed stays missing;
//   - follows the leader among several controllers (transport/controller_finder.h):
//     a kNotLeader reply names the leader to move to; a controller silent
//     for a heartbeat interval plus 500 ms is given up, and the finder asked
//     again every 250 ms until one answers. On moving it registers and sends
//     its inventory, as after a restart. An elected controller's epoch
//     orders leaderships: replies and commands from an epoch older than one
//     already seen, or from another epoch than the one registered with, are
//     ignored (a deposed leader cannot command this node), unless the
//     leader it follows keeps claiming the lower epoch for two lease TTLs:
//     then etcd was wiped or restored, and it follows (proto/message.h).
// Inventory parts hold at most WireLimits::max_batch keys, what the
// controller decodes; a part that cannot be sent makes the whole inventory
// go again at the next heartbeat.
// Remote-tier (Redis) keys are reported as events but not inventoried: the
// remote tier is the cluster's. Thread-safety: OnEvents from any thread;
// Start/Stop from the owner.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "pikv/node/request_handler.h"
#include "pikv/storage/storage_manager.h"
#include "pikv/transport/controller_finder.h"

namespace pikv::node {

struct ReporterOptions {
  // The controller: an endpoint, a list, or etcd://... (coord/find_controllers.h).
  std::string controller;
  // Shared with the node's puller; NodeServer::Start makes it from `controller`.
  std::shared_ptr<ControllerFinder> finder;
  std::string node_id;
  std::string host;  // for same-host ordering in locate
  std::string tcp;   // advertised endpoints
  std::string ipc;
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds register_jitter{
      500};  // upper bound of the random delay before re-registering
  size_t batch_events = 1024;
  std::chrono::milliseconds batch_delay{20};
  size_t queue_capacity = 1 << 16;  // events held before overflowing to a full resync
  size_t inventory_part = 4096;     // keys per inventory message (at most WireLimits::max_batch)
  // The keys to dial the controller over CURVE (its key from the keyring,
  // which NodeServer::Start checks); null: security off.
  std::shared_ptr<const CurveSecurity> security;
  // Told of each engine the controller revokes (kRevoke, and the revoked
  // engines a register reply names), and whether this node is the one to
  // sweep the remote tier for it (kRevoke's sweep_shared); must return at
  // once (the reporter's thread). Set by NodeServer::Start.
  std::function<void(const std::string& engine, bool shared_tier)> on_revoke;
};

// The bounded event queue between the tiers and the reporter thread.
class EventQueue {
 public:
  explicit EventQueue(size_t capacity) : capacity_(capacity) {}
  void Push(std::span<const storage::TierEvent> events);
  // Moves up to `max` events into `out`; returns whether the queue overflowed
  // since the last call (the caller then resyncs in full).
  bool Take(size_t max, std::vector<storage::TierEvent>& out);
  void Clear();
  size_t size() const;
  uint64_t overflows() const { return overflows_; }

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::deque<storage::TierEvent> events_;  // guarded by mu_
  bool dirty_ = false;                     // guarded by mu_
  std::atomic<uint64_t> overflows_{0};
};

class Reporter {
 public:
  Reporter(ReporterOptions options, EventQueue& queue, storage::StorageManager& storage,
           RequestHandler& handler, uint64_t capacity_cpu, uint64_t capacity_disk);
  ~Reporter();  // Stop()

  void Start();
  // Sends what is queued, deregisters, and stops the thread.
  void Stop();
  bool registered() const { return registered_; }
  // The controller this node reports to now (empty: none found).
  std::string controller() const;
  uint64_t inventories_sent() const { return inventories_; }
  uint64_t refused() const { return refused_; }  // messages the controller refused

 private:
  class Loop;
  void Run();  // the thread's body: Loop, defined beside it

  ReporterOptions options_;
  EventQueue& queue_;
  storage::StorageManager& storage_;
  RequestHandler& handler_;
  uint64_t capacity_cpu_, capacity_disk_;
  const uint64_t incarnation_;
  std::atomic<bool> registered_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> inventories_{0}, refused_{0};
  mutable std::mutex controller_mu_;
  std::string controller_;  // guarded by controller_mu_
  std::thread thread_;
};

}  // namespace pikv::node
