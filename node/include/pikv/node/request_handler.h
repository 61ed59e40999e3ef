// RequestHandler: turns one decoded request into its reply, against a
// StorageManager. No sockets here: the server feeds it, tests call it
// directly. Counts requests by type and errors by kind.
// Thread-safety: Handle may be called from many threads at once.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pikv/common/stats_registry.h"
#include "pikv/node/latency_histogram.h"
#include "pikv/node/node_stats.h"
#include "pikv/proto/message.h"
#include "pikv/proto/permissions.h"
#include "pikv/storage/storage_manager.h"
#include "pikv/transport/controller_finder.h"
#include "pikv/transport/curve.h"

namespace pikv::node {

class Puller;

// Who sent a request, as the node's checks need it (proto/owner.h). An
// engine reads only its tenant's objects (another's are misses), may put
// only objects of its tenant, and is recorded as the writer of what it
// puts. Everyone else here (admins, nodes) sees every tenant and keeps the
// writer an object names.
struct Caller {
  std::optional<storage::PutIdentity> engine;  // nullopt: sees every tenant
  const std::string* only_tenant() const { return engine ? &engine->tenant : nullptr; }
  const storage::PutIdentity* writer() const { return engine ? &*engine : nullptr; }
};

// How a node pulls from its peers (kPull).
struct PullOptions {
  // Where the peers are looked up (the reporter's finder); null: pulls are refused.
  std::shared_ptr<ControllerFinder> controller;
  size_t max_idle_connections = 16;  // peer connections kept between pulls
  // Frame size asked of peers for streamed replies (message.h); 0: unstreamed.
  uint64_t stream_frame_bytes = 1 << 20;
  // This node's keys to dial the controller and peers over CURVE; null: off.
  std::shared_ptr<const CurveSecurity> security;
};

class RequestHandler {
 public:
  using Clock = std::chrono::steady_clock;
  // A pull's deadline when the request names none, and the most it may ask.
  static constexpr std::chrono::milliseconds kDefaultPullTimeout{2000};
  static constexpr std::chrono::milliseconds kMaxPullTimeout{60000};
  // The most messages one streamed reply may take (within the server's send
  // high-water mark); a get that would need more is answered unstreamed.
  static constexpr uint64_t kMaxStreamMessages = 8192;

  RequestHandler(storage::StorageManager& storage, std::string node_id, PullOptions pull = {});
  ~RequestHandler();

  // `received`: when the request arrived (deadlines in it count from then).
  Message Handle(Message& request, Clock::time_point received = Clock::now(),
                 const Caller& caller = {});
  // The reply when it can be produced without blocking on disk or network
  // (CPU-tier hits, local exists, pins, stats, ping); nullopt otherwise.
  std::optional<Message> TryHandleInline(Message& request, const Caller& caller = {});
  // The reply to a request that failed before it could be handled.
  Message Reject(const Header* request, const Status& why);

  // Times a request in its row's latency histogram (permissions.h).
  void RecordLatency(MsgType type, std::chrono::nanoseconds d);
  const LatencyHistogram& latency(Latency c) const { return latency_[static_cast<int>(c)]; }
  // The node's counters (node_stats.h): the handler's, the puller's and the
  // storage manager's; the node server adds its other parts' before serving.
  StatsRegistry& stats() { return stats_; }
  const StatsRegistry& stats() const { return stats_; }
  // The stats reply's fields: the node's id and every sample, by field name.
  Fields StatsFields() const;

 private:
  Message HandleGet(Message& req, const Caller& caller);
  // Marks an inline get reply to be streamed when the request asked for it.
  void MaybeStream(const Header& request, Message& reply);
  Message HandlePut(Message& req, const Caller& caller);
  Message HandlePull(Message& req, Clock::time_point received, const Caller& caller);
  void AddOwnSources();            // the handler's counters, the puller's, the storage manager's
  void CountServed(MsgType type);  // a request received, and served by its type
  Message HandlePerKey(Message& req, Status (storage::StorageManager::*op)(const ChunkKey&));

  storage::StorageManager& storage_;
  LatencyHistogram latency_[kNumLatencies];
  std::string node_id_;
  std::unique_ptr<Puller> puller_;
  // Served, per row of the request table (Permissions(); the node's rows).
  std::vector<std::atomic<uint64_t>> served_;
  stats::RequestCounters counters_;
  StatsRegistry stats_;
};

}  // namespace pikv::node
