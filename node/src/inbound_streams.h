// InboundStreams: the node's half of streamed puts (message.h). Per client
// identity, the arena space a stream is written into, how much has arrived
// and the running payload checksum; the object is verified and admitted when
// its last frame lands. Only the serve thread calls it (counters may be read
// from any thread). Bounded: kMaxStreams at once, one per client; a stream
// that stalls for kStreamStallMs, or sends a frame of the wrong size, ends
// and its space is freed, so a client cut off halfway leaves nothing behind.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <span>
#include <string>

#include "pikv/node/node_stats.h"
#include "pikv/proto/chunk_object.h"
#include "pikv/proto/message.h"
#include "pikv/storage/storage_manager.h"

namespace pikv::node {

class InboundStreams {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxStreams = 16;

  InboundStreams(storage::StorageManager& storage, WireLimits limits);

  // A put that asks to stream: the "send" reply (space reserved) or, when it
  // cannot start, the put's final answer.
  // `writer`: the engine putting (storage::PutIdentity), or null to keep
  // the object's own.
  Message Start(const std::string& peer, const Header& request, Clock::time_point now,
                std::optional<storage::PutIdentity> writer = std::nullopt);
  // Whether `peer`'s next messages are frames of its stream.
  bool Receiving(const std::string& peer) const { return streams_.contains(peer); }
  // One frame from a streaming peer (`frames` is the number of frames its
  // message had; only 1 is valid): the put's final answer once the stream
  // ends, for better or worse.
  std::optional<Message> Accept(const std::string& peer, size_t frames,
                                std::span<const uint8_t> bytes, Clock::time_point now);
  // Ends streams idle for longer than kStreamStallMs; returns how many.
  size_t ExpireStalled(Clock::time_point now);

  // Ends every unfinished stream, freeing its space (the node stopping; the
  // counters stay readable until the object goes).
  void EndAll() { streams_.clear(); }

  size_t active() const { return streams_.size(); }
  const stats::InboundCounters& counters() const { return counters_; }

 private:
  struct Stream {
    Header request;  // answered at the end
    ChunkKey key;
    std::optional<storage::PutIdentity> writer;
    storage::CpuTier::Reservation space;
    uint64_t frame = 0, received = 0;
    StreamingPayloadChecksum checksum;
    Clock::time_point last_frame;
  };
  Message Finish(const Header& request, const Status& outcome);

  storage::StorageManager& storage_;
  WireLimits limits_;
  std::map<std::string, Stream> streams_;
  stats::InboundCounters counters_;
};

}  // namespace pikv::node
