// Puller: the node's half of a P2P fetch (kPull).
//
// A pull names keys and, optionally, the peer the client's plan named
// (PullRequest::from): the engine located the keys moments ago, so that peer
// is asked first, locating nothing, when the controller has named it to
// this node before (a pull request never adds a peer: the node dials only
// peers the controller named). What is still missing then, or everything
// without a plan, is located (kLocate) and each key fetched from a node
// that holds it in CPU or disk: the preferred one when the controller lists
// it, otherwise the cheapest, then the next (at most kMaxSourcesPerKey);
// never this node itself. While no controller answers
// (a failover), the locations it last gave are used, or for a key never
// located the peers it named last (LocationMemory); so too for a key it
// names no copy of while its registry is filling (a new leadership), and
// for other keys it names no copy of, where it last named them.
// Objects are admitted here through StorageManager::Put (size, checksum and
// key verified) and returned like a get; with admit_only only the
// per-key outcome is returned (a local client then reads the objects in
// place). Peers are asked to stream (message.h): the bytes then go in
// bounded frames straight into reserved arena space, hashed as they arrive,
// and are committed only when complete and verified; a stream cut halfway
// leaves nothing (the reservation is freed) and its connection is dropped. Everything is bounded by
// the caller's deadline; a dead or slow peer or controller makes misses, never an error the engine
// sees. Connections come from a bounded PeerPool. Thread-safety: Pull may be called from many
// threads at once.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <set>
#include <string>

#include "peer_pool.h"
#include "pikv/node/location_memory.h"
#include "pikv/node/node_stats.h"
#include "pikv/node/request_handler.h"
#include "pikv/proto/data_wire.h"
#include "pikv/proto/locate_reply.h"
#include "pikv/proto/message.h"
#include "pikv/storage/storage_manager.h"

namespace pikv::node {

class Puller {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxSourcesPerKey = 3;
  static constexpr std::chrono::milliseconds kLocateBackoff{250};

  Puller(storage::StorageManager& storage, std::string node_id, PullOptions options);

  // The reply to a validated pull request (keys within limits). Per-key
  // values are kOk (one payload frame each) or kNotFound.
  Message Pull(const Header& request, const PullRequest& pull, Clock::time_point deadline);
  const stats::PullCounters& counters() const { return counters_; }

 private:
  struct Source {
    std::string tcp, node_id;
  };
  // Per key, the nodes to ask in turn, `preferred` (a tcp endpoint) first;
  // all empty (and `why_none` set) when no controller answered and nothing
  // is remembered.
  std::vector<std::vector<Source>> Sources(const std::vector<ChunkKey>& keys,
                                           const std::string& preferred, Clock::time_point deadline,
                                           std::string& why_none);
  // Whether the peer at `tcp` may be dialled as node `node_id`: another
  // node, a tcp endpoint, and with security on one the keyring lists.
  bool MayAsk(const std::string& tcp, const std::string& node_id) const;
  // The client's planned peer at `tcp`, if the controller has named it here.
  std::optional<Source> PlannedPeer(const std::string& tcp) const;
  // Asks each key without an object of its sources in turn, admitting what
  // comes into `objects`; peers that fail join `failed` (and the reason the
  // last failure's). Whether any peer was asked.
  bool FetchRounds(const Header& request, const std::vector<std::vector<Source>>& sources,
                   Clock::time_point deadline, std::set<std::string>& failed,
                   std::vector<SharedBuffer>& objects, std::string& reason);
  // Asks `peer` for the request's keys `idx` and admits what it sends
  // (verified) into `objects`; an error when the peer did not answer whole.
  Status FetchFrom(const Source& peer, const std::vector<size_t>& idx, const Header& request,
                   Clock::time_point deadline, std::vector<SharedBuffer>& objects);
  // Where `keys` are, from the leader controller.
  // `filling`: the registry may not know every copy yet (message.h).
  Result<std::vector<std::vector<Replica>>> Locate(const std::vector<ChunkKey>& keys,
                                                   Clock::time_point deadline, bool& filling);
  // Receives a streamed reply's hits into reserved arena space and commits
  // each (admitted[i] for keys[i]); false when the stream broke off or is
  // malformed.
  bool ReceiveStream(RpcClient& peer, const Header& reply, std::span<const ChunkKey> keys,
                     std::vector<bool>& admitted, Clock::time_point deadline);

  storage::StorageManager& storage_;
  const std::string node_id_;
  const PullOptions options_;
  PeerPool pool_;
  LocationMemory memory_;
  stats::PullCounters counters_;
  std::atomic<Clock::rep> skip_locate_until_{0};  // steady-clock ticks
};

}  // namespace pikv::node
