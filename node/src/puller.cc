#include "puller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>

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
      if (space.ok()) checksum.CopyIn(space->data + off, {got->data(), expected});
      off += expected;
    }
    if (space.ok()) {
      admitted[i] = storage_.Commit(keys[i], std::move(*space), checksum.Digest()).ok();
      counters_.Add(stats::PullCounter::kStreamed);
    }
  }
  return true;
}

Puller::Puller(storage::StorageManager& storage, std::string node_id, PullOptions options)
    : storage_(storage),
      node_id_(std::move(node_id)),
      options_(std::move(options)),
      pool_(options_.max_idle_connections) {}

Result<std::vector<std::vector<Replica>>> Puller::Locate(const std::vector<ChunkKey>& keys,
                                                         Clock::time_point deadline,
                                                         bool& filling) {
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
      options_.controller->FollowNotLeader(answer->header);
      last = Status(ErrorCode::kNotLeader, answer->header.reason);
      continue;
    }
    if (!answer.ok() || answer->header.status != ErrorCode::kOk) {
      controller.Discard();
      return answer.ok() ? Status(answer->header.status, answer->header.reason) : answer.status();
    }
    auto decoded = DecodeLocateReply(answer->header, keys.size());
    if (!decoded.ok()) controller.Discard();
    filling = RegistryFilling(answer->header);
    return decoded;
  }
  return last;
}

bool Puller::MayAsk(const std::string& tcp, const std::string& node_id) const {
  if (node_id == node_id_ || !ParseTcpEndpoint(tcp).ok()) return false;
  return !options_.security || options_.security->keyring.NodeKey(node_id);
}

std::optional<Puller::Source> Puller::PlannedPeer(const std::string& tcp) const {
  if (tcp.empty()) return std::nullopt;
  const std::string node_id = memory_.NodeAt(tcp);
  if (node_id.empty() || !MayAsk(tcp, node_id)) return std::nullopt;
  return Source{tcp, node_id};
}

std::vector<std::vector<Puller::Source>> Puller::Sources(const std::vector<ChunkKey>& keys,
                                                         const std::string& preferred,
                                                         Clock::time_point deadline,
                                                         std::string& why_none) {
  // Where the controller says the keys are; while none answers (a failover),
  // where it last said.
  // The controller gets half the deadline (a dead leader must leave time
  // for the peers), and is not asked again for kLocateBackoff after it
  // failed to answer.
  std::vector<std::vector<Replica>> copies;
  bool filling = false;
  const auto now = Clock::now();
  Result<std::vector<std::vector<Replica>>> located =
      Unavailable("no answer from the controller a moment ago");
  if (now.time_since_epoch().count() >= skip_locate_until_.load()) {
    counters_.Add(stats::PullCounter::kLocated);
    located = Locate(keys, now + Left(deadline) / 2, filling);
    if (!located.ok())
      skip_locate_until_ = (Clock::now() + kLocateBackoff).time_since_epoch().count();
  }
  if (located.ok()) {
    memory_.Remember(keys, *located);
    copies = std::move(*located);
    // A key the controller names no peer's copy of (a copy gone since the
    // client located it, or a registry the nodes are still filling): where
    // it was last seen; while the registry is filling, also a key never
    // located here, from the peers seen last (a settled registry's "none"
    // is taken at its word: no broadcast).
    std::vector<size_t> unnamed;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (std::none_of(copies[i].begin(), copies[i].end(), [&](const Replica& c) {
            return c.location.tier != TierKind::kRemote && c.node_id != node_id_;
          }))
        unnamed.push_back(i);
    }
    if (!unnamed.empty()) {
      std::vector<ChunkKey> ask;
      for (size_t i : unnamed) ask.push_back(keys[i]);
      auto recalled = memory_.Recall(ask, /*peers_for_unknown=*/filling);
      for (size_t j = 0; j < unnamed.size(); ++j) copies[unnamed[j]] = std::move(recalled[j]);
    }
  } else {
    copies = memory_.Recall(keys);
    why_none = "controller: " + located.status().ToString();
    if (std::all_of(copies.begin(), copies.end(), [](const auto& c) { return c.empty(); }))
      return std::vector<std::vector<Source>>(keys.size());
    counters_.Add(stats::PullCounter::kFromMemory);
    spdlog::debug("pull: {}; asking where it last named", why_none);
  }
  // Never this node, never the remote tier (the node reads Redis itself on
  // a get); with security on, only peers whose key the keyring lists (CURVE
  // then proves they are who the controller says). The preferred peer first.
  std::vector<std::vector<Source>> sources(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    for (const Replica& c : copies[i]) {
      if (c.location.tier == TierKind::kRemote || c.node_id == node_id_) continue;
      if (!MayAsk(c.tcp, c.node_id)) continue;
      sources[i].push_back({c.tcp, c.node_id});
    }
    auto first = std::find_if(sources[i].begin(), sources[i].end(),
                              [&](const Source& s) { return s.tcp == preferred; });
    if (first != sources[i].end()) std::rotate(sources[i].begin(), first, first + 1);
    if (sources[i].size() > kMaxSourcesPerKey) sources[i].resize(kMaxSourcesPerKey);
  }
  return sources;
}

Status Puller::FetchFrom(const Source& peer_node, const std::vector<size_t>& idx,
                         const Header& request, Clock::time_point deadline,
                         std::vector<SharedBuffer>& objects) {
  std::optional<CurveClientKeys> curve;
  if (options_.security) {
    auto keys = options_.security->ForNode(peer_node.node_id);
    if (!keys.ok()) return keys.status();
    curve = std::move(*keys);
  }
  auto peer = pool_.Acquire(peer_node.tcp, curve);
  Message get;
  get.header.type = MsgType::kGet;
  for (size_t i : idx) get.header.keys.push_back(request.keys[i]);
  if (options_.stream_frame_bytes > 0)
    SetStreamFrame(static_cast<int64_t>(options_.stream_frame_bytes), get.header);
  const std::vector<ChunkKey> keys = get.header.keys;
  auto answer = peer->Call(std::move(get), Left(deadline));
  if (answer.ok() && answer->header.status == ErrorCode::kOk && HasStreamFrame(answer->header)) {
    std::vector<bool> admitted(idx.size(), false);
    const bool whole = ReceiveStream(*peer, answer->header, keys, admitted, deadline);
    if (!whole) peer.Discard();  // the rest of the stream would still arrive on it
    for (size_t j = 0; j < idx.size(); ++j) {
      if (!admitted[j]) continue;
      if (auto held = storage_.cpu().Get(keys[j]); held.ok()) objects[idx[j]] = std::move(*held);
    }
    return whole ? Status::Ok() : Unavailable("streamed reply broken off");
  }
  auto got = rpc::ObjectsFromReply(std::move(answer), idx.size());
  if (!got.ok()) {
    peer.Discard();  // reconnect next time
    return got.status();
  }
  for (size_t j = 0; j < idx.size(); ++j) {
    Result<SharedBuffer>& r = (*got)[j];
    if (!r.ok()) continue;
    // Put verifies size, checksum and key before admitting; a bad copy is a miss.
    if (storage_.Put(request.keys[idx[j]], *r).ok()) objects[idx[j]] = std::move(*r);
  }
  return Status::Ok();
}

bool Puller::FetchRounds(const Header& request, const std::vector<std::vector<Source>>& sources,
                         Clock::time_point deadline, std::set<std::string>& failed,
                         std::vector<SharedBuffer>& objects, std::string& reason) {
  // Round r asks each key still missing of its r-th source, one request per
  // peer: a dead, hung or stale peer costs a round, not the key. A call gets
  // the time left shared by the rounds some key may still need; a peer that
  // failed is not asked again.
  auto fail = [&](const std::string& why) {
    counters_.Add(stats::PullCounter::kFailures);
    reason = why;
    spdlog::debug("pull: {}", why);
  };
  bool asked = false;
  for (size_t round = 0; round < kMaxSourcesPerKey && Left(deadline).count() > 0; ++round) {
    std::map<std::string, std::pair<Source, std::vector<size_t>>> by_peer;
    size_t rounds_left = 1;
    for (size_t i = 0; i < objects.size(); ++i) {
      if (!objects[i].empty() || round >= sources[i].size()) continue;
      rounds_left = std::max(rounds_left, sources[i].size() - round);
      if (failed.count(sources[i][round].tcp)) continue;
      auto& [peer, idx] = by_peer[sources[i][round].tcp];
      peer = sources[i][round];
      idx.push_back(i);
    }
    for (const auto& [endpoint, job] : by_peer) {
      if (Left(deadline).count() == 0) {
        fail("deadline passed");
        break;
      }
      asked = true;
      const auto call_deadline = Clock::now() + Left(deadline) / rounds_left;
      if (Status s = FetchFrom(job.first, job.second, request, call_deadline, objects); !s.ok()) {
        failed.insert(endpoint);
        fail("peer " + endpoint + ": " + s.ToString());
      }
    }
  }
  return asked;
}

Message Puller::Pull(const Header& request, const PullRequest& pull, Clock::time_point deadline) {
  const size_t n = request.keys.size();
  Message reply;
  reply.header = ReplyTo(request);
  reply.header.values.assign(n, static_cast<int64_t>(ErrorCode::kNotFound));
  if (n == 0) return reply;
  std::vector<SharedBuffer> objects(n);
  std::set<std::string> failed;
  bool asked = false;
  // The peer the client's plan named, when the controller has named it here
  // before: asked first, with half the time, and nothing located (the plan
  // was located moments ago, on the engine's side).
  const std::string& preferred = pull.from;
  if (const std::optional<Source> planned = PlannedPeer(preferred)) {
    counters_.Add(stats::PullCounter::kAsPlanned);
    const std::vector<std::vector<Source>> first(n, {*planned});
    asked = FetchRounds(request, first, Clock::now() + Left(deadline) / 2, failed, objects,
                        reply.header.reason);
    failed.insert(planned->tcp);  // what it lacked, it lacks: not asked again below
  }
  // The rest (all, without a plan): wherever the controller says now.
  std::vector<size_t> missing;
  std::vector<ChunkKey> missing_keys;
  for (size_t i = 0; i < n; ++i) {
    if (objects[i].empty()) {
      missing.push_back(i);
      missing_keys.push_back(request.keys[i]);
    }
  }
  std::string why_none;
  if (!missing.empty() && Left(deadline).count() > 0) {
    auto located = Sources(missing_keys, preferred, deadline, why_none);
    std::vector<std::vector<Source>> sources(n);
    for (size_t j = 0; j < missing.size(); ++j) sources[missing[j]] = std::move(located[j]);
    asked = FetchRounds(request, sources, deadline, failed, objects, reply.header.reason) || asked;
  }
  if (!asked && !why_none.empty()) {
    counters_.Add(stats::PullCounter::kFailures);
    reply.header.reason = why_none;
    spdlog::debug("pull: {}", why_none);
  }
  // A local client on the zero-copy channel reads what was admitted in place.
  const bool admit_only = pull.admit_only;
  for (size_t i = 0; i < n; ++i) {
    if (objects[i].empty()) continue;
    counters_.Add(stats::PullCounter::kObjects);
    counters_.Add(stats::PullCounter::kBytes, objects[i].size());
    reply.header.values[i] = static_cast<int64_t>(ErrorCode::kOk);
    if (!admit_only) reply.payloads.push_back(std::move(objects[i]));
  }
  return reply;
}

}  // namespace pikv::node
