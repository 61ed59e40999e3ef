#include "puller.h"

#include <spdlog/spdlog.h>

#include <cstring>
#include <map>

#include "pikv/proto/chunk_object.h"
#include "pikv/proto/endpoint.h"
#include "pikv/proto/locate_reply.h"
#include "pikv/rpc/node_client.h"

namespace pikv::node {

namespace {

std::chrono::milliseconds Left(Puller::Clock::time_point deadline) {
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Puller::Clock::now());
  return std::max(std::chrono::milliseconds(0), left);
}

}  // namespace

bool Puller::ReceiveStream(RpcClient& peer, const Header& reply, std::span<const ChunkKey> keys,
                           std::vector<bool>& admitted, Clock::time_point deadline) {
  auto hits = DecodeStreamedHits(reply, keys.size(), WireLimits{});
  if (!hits.ok()) return false;
  const uint64_t frame = hits->frame;
  const std::vector<uint64_t>& sizes = hits->sizes;
  size_t h = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (reply.values[i] != 0) continue;
    const uint64_t size = sizes[h++];
    // Straight into arena space; without room, the bytes are still read
    // (the stream must stay in step) and the key is a miss.
    auto space = storage_.Reserve(size);
    StreamingPayloadChecksum checksum;
    for (uint64_t off = 0; off < size;) {
      auto got = peer.ReceiveFrame(Left(deadline));
      const uint64_t expected = std::min<uint64_t>(frame, size - off);
      if (!got.ok() || got->size() != expected) return false;
      if (space.ok()) {
        std::memcpy(space->data + off, got->data(), expected);
        checksum.Append({space->data + off, expected});
      }
      off += expected;
    }
    if (space.ok()) {
      admitted[i] = storage_.Commit(keys[i], std::move(*space), checksum.Digest()).ok();
      streamed_objects_++;
    }
  }
  return true;
}

Puller::Puller(storage::StorageManager& storage, std::string node_id, PullOptions options)
    : storage_(storage),
      node_id_(std::move(node_id)),
      options_(std::move(options)),
      pool_(options_.max_idle_connections) {}

Result<std::vector<std::vector<LocatedCopy>>> Puller::Locate(const std::vector<ChunkKey>& keys,
                                                             Clock::time_point deadline) {
  std::optional<CurveClientKeys> curve;
  if (options_.security) {
    auto dial = options_.security->ForController();
    if (!dial.ok()) return dial.status();
    curve = std::move(*dial);
  }
  // The leader, as the reporter follows it; a standby names the leader, once.
  Status last = Unavailable("no controller found");
  for (int attempt = 0; attempt < 2 && Left(deadline).count() > 0; ++attempt) {
    const std::string endpoint = options_.controller->Current();
    if (endpoint.empty()) break;
    auto controller = pool_.Acquire(endpoint, curve);
    Message locate;
    locate.header.type = MsgType::kLocate;
    locate.header.keys = keys;
    auto answer = controller->Call(std::move(locate), Left(deadline));
    if (answer.ok() && answer->header.status == ErrorCode::kNotLeader) {
      options_.controller->Redirect(FieldString(answer->header.fields, kLeaderField),
                                    FieldInt(answer->header.fields, kLeaderEpochField));
      last = Status(ErrorCode::kNotLeader, answer->header.reason);
      continue;
    }
    if (!answer.ok() || answer->header.status != ErrorCode::kOk) {
      controller.Discard();
      return answer.ok() ? Status(answer->header.status, answer->header.reason) : answer.status();
    }
    auto decoded = DecodeLocateReply(answer->header, keys.size());
    if (!decoded.ok()) controller.Discard();
    return decoded;
  }
  return last;
}

Message Puller::Pull(const Header& request, Clock::time_point deadline) {
  const size_t n = request.keys.size();
  Message reply;
  reply.header = ReplyTo(request);
  reply.header.values.assign(n, static_cast<int64_t>(ErrorCode::kNotFound));
  if (n == 0) return reply;
  auto fail = [&](const std::string& why) {
    failures_++;
    reply.header.reason = why;
    spdlog::debug("pull: {}", why);
  };

  // 1. Where are the keys? Only the controller's answer names peers.
  auto located = Locate(request.keys, deadline);
  if (!located.ok()) {
    fail("controller: " + located.status().ToString());
    return reply;
  }
  std::vector<std::vector<LocatedCopy>> copies = std::move(*located);

  // 2. One source per key: the preferred peer if it holds the key, else the
  // cheapest node that does; never this node, never the shared tier (the
  // node reads Redis itself on a get). With security on, only peers whose
  // key the keyring lists (CURVE then proves they are who the controller
  // says).
  const std::string preferred = FieldString(request.fields, "from");
  std::map<std::string, std::vector<size_t>> by_peer;
  std::map<std::string, CurveClientKeys> peer_keys;  // by endpoint, when secure
  for (size_t i = 0; i < n; ++i) {
    const LocatedCopy* pick = nullptr;
    for (const LocatedCopy& c : copies[i]) {
      if (c.tier == TierKind::kRemote || c.node_id == node_id_) continue;
      if (!ParseTcpEndpoint(c.tcp).ok()) continue;
      if (options_.security && !options_.security->keyring.NodeKey(c.node_id)) continue;
      if (!pick || c.tcp == preferred) pick = &c;
      if (c.tcp == preferred) break;
    }
    if (!pick) continue;
    by_peer[pick->tcp].push_back(i);
    if (options_.security) peer_keys[pick->tcp] = *options_.security->ForNode(pick->node_id);
  }

  // 3. Fetch from each peer, verify and admit.
  std::vector<SharedBuffer> objects(n);
  for (const auto& [endpoint, idx] : by_peer) {
    if (Left(deadline).count() == 0) {
      fail("deadline passed");
      break;
    }
    std::optional<CurveClientKeys> curve;
    if (auto it = peer_keys.find(endpoint); it != peer_keys.end()) curve = it->second;
    auto peer = pool_.Acquire(endpoint, curve);
    Message get;
    get.header.type = MsgType::kGet;
    for (size_t i : idx) get.header.keys.push_back(request.keys[i]);
    if (options_.stream_frame_bytes > 0)
      get.header.fields[kStreamFrameField] = static_cast<int64_t>(options_.stream_frame_bytes);
    const std::vector<ChunkKey> keys = get.header.keys;
    auto answer = peer->Call(std::move(get), Left(deadline));
    if (answer.ok() && answer->header.status == ErrorCode::kOk &&
        answer->header.fields.contains(kStreamFrameField)) {
      std::vector<bool> admitted(idx.size(), false);
      if (!ReceiveStream(*peer, answer->header, keys, admitted, deadline)) {
        peer.Discard();  // the rest of the stream would still arrive on it
        fail("peer " + endpoint + ": streamed reply broken off");
      }
      for (size_t j = 0; j < idx.size(); ++j) {
        if (!admitted[j]) continue;
        if (auto held = storage_.cpu().Get(keys[j]); held.ok()) objects[idx[j]] = std::move(*held);
      }
      continue;
    }
    auto got = rpc::ObjectsFromReply(std::move(answer), idx.size());
    if (!got.ok()) {
      peer.Discard();  // reconnect next time
      fail("peer " + endpoint + ": " + got.status().ToString());
      continue;
    }
    for (size_t j = 0; j < idx.size(); ++j) {
      Result<SharedBuffer>& r = (*got)[j];
      if (!r.ok()) continue;
      // Put verifies size, checksum and key before admitting; a bad copy is a miss.
      if (storage_.Put(request.keys[idx[j]], *r).ok()) objects[idx[j]] = std::move(*r);
    }
  }
  // A local client on the zero-copy channel reads what was admitted in place.
  const bool admit_only = FieldInt(request.fields, "admit_only", 0) != 0;
  for (size_t i = 0; i < n; ++i) {
    if (objects[i].empty()) continue;
    objects_++;
    reply.header.values[i] = static_cast<int64_t>(ErrorCode::kOk);
    if (!admit_only) reply.payloads.push_back(std::move(objects[i]));
  }
  return reply;
}

}  // namespace pikv::node
