#include "inbound_streams.h"

#include <spdlog/spdlog.h>

namespace pikv::node {

InboundStreams::InboundStreams(storage::StorageManager& storage, WireLimits limits)
    : storage_(storage), limits_(limits) {}

Message InboundStreams::Finish(const Header& request, const Status& outcome) {
  Message reply;
  reply.header = ReplyTo(request);
  reply.header.values = {static_cast<int64_t>(outcome.code())};
  reply.header.reason = outcome.message();
  return reply;
}

Message InboundStreams::Start(const std::string& peer, const Header& request, Clock::time_point now,
                              std::optional<storage::PutIdentity> writer) {
  const auto [frame, size] = DecodeStreamedPut(request);
  auto refuse = [&](Status why) {
    counters_.Add(stats::InboundCounter::kRefused);
    if (why.code() == ErrorCode::kInvalidArgument) {
      Message reply;
      reply.header = ReplyTo(request, why.code(), why.message());
      return reply;
    }
    return Finish(request, why);
  };
  if (request.keys.size() != 1)
    return refuse(InvalidArgument("a streamed put carries exactly one key"));
  if (frame < kMinStreamFrame || frame > kMaxStreamFrame)
    return refuse(InvalidArgument("stream_frame out of bounds"));
  if (size < 1 || static_cast<uint64_t>(size) > limits_.max_payload_bytes)
    return refuse(InvalidArgument("stream_size out of bounds"));
  if (streams_.contains(peer)) return refuse(InvalidArgument("a stream is already open"));
  if (streams_.size() >= kMaxStreams)
    return refuse(Status(ErrorCode::kRetry, "node busy: too many streamed puts"));
  auto space = storage_.Reserve(static_cast<uint64_t>(size));
  if (!space.ok()) return refuse(space.status());
  Stream& s = streams_[peer];
  s.request = request;
  s.key = request.keys[0];
  s.writer = std::move(writer);
  s.space = std::move(*space);
  s.frame = static_cast<uint64_t>(frame);
  s.last_frame = now;
  counters_.Add(stats::InboundCounter::kStarted);
  Message go;
  go.header = ReplyTo(request);
  SetStreamFrame(frame, go.header);
  return go;
}

std::optional<Message> InboundStreams::Accept(const std::string& peer, size_t frames,
                                              std::span<const uint8_t> bytes,
                                              Clock::time_point now) {
  auto it = streams_.find(peer);
  if (it == streams_.end()) return std::nullopt;
  Stream& s = it->second;
  const uint64_t expected = std::min(s.frame, s.space.size - s.received);
  if (frames != 1 || bytes.size() != expected) {
    counters_.Add(stats::InboundCounter::kBroken);
    Message reply = Finish(s.request, ProtocolError("stream frame of the wrong size"));
    streams_.erase(it);  // frees the space
    return reply;
  }
  s.checksum.CopyIn(s.space.data + s.received, bytes);
  s.received += bytes.size();
  s.last_frame = now;
  if (s.received < s.space.size) return std::nullopt;
  const Status outcome = storage_.Commit(s.key, std::move(s.space), s.checksum.Digest(),
                                         s.writer ? &*s.writer : nullptr);
  counters_.Add(outcome.ok() ? stats::InboundCounter::kCompleted : stats::InboundCounter::kRefused);
  Message reply = Finish(s.request, outcome);
  streams_.erase(it);
  return reply;
}

size_t InboundStreams::ExpireStalled(Clock::time_point now) {
  size_t n = 0;
  for (auto it = streams_.begin(); it != streams_.end();) {
    if (now - it->second.last_frame > std::chrono::milliseconds(kStreamStallMs)) {
      spdlog::warn("streamed put of {} stalled after {} of {} bytes: dropped", it->second.key.Hex(),
                   it->second.received, it->second.space.size);
      it = streams_.erase(it);
      n++;
    } else {
      ++it;
    }
  }
  counters_.Add(stats::InboundCounter::kExpired, n);
  return n;
}

}  // namespace pikv::node
