#include "pikv/controller/cluster_state.h"

#include <algorithm>
#include <tuple>

#include "pikv/common/enum_names.h"
#include "pikv/proto/endpoint.h"

namespace pikv::controller {

namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Everything a registration carries ends up in tables, JSON and metric
// labels: it is checked here, once, before any of them sees it.
Status CheckRegistration(const NodeRegistration& reg) {
  if (Status s = CheckNodeId(reg.id); !s.ok()) return s;
  if (!reg.host.empty()) {
    if (Status s = CheckHostName(reg.host); !s.ok()) return s;
  }
  if (!reg.tcp.empty()) {
    auto e = ParseTcpEndpoint(reg.tcp);
    if (!e.ok()) return InvalidArgument("tcp " + e.status().message());
    // Peers dial this address: a wildcard would make them dial themselves.
    if (IsWildcardHost(e->host))
      return InvalidArgument("tcp endpoint " + reg.tcp +
                             " is a wildcard: advertise a reachable host");
  }
  if (!reg.ipc.empty()) {
    auto e = ParseEndpoint(reg.ipc);
    if (!e.ok()) return InvalidArgument("ipc " + e.status().message());
    if (e->transport != Endpoint::Transport::kIpc)
      return InvalidArgument("ipc endpoint is not ipc://");
  }
  return Status::Ok();
}

}  // namespace

std::string_view NodeStateName(NodeState s) {
  static constexpr EnumName<NodeState> kNames[] = {{NodeState::kAlive, "alive"},
                                                   {NodeState::kSuspect, "suspect"},
                                                   {NodeState::kDead, "dead"},
                                                   {NodeState::kGone, "gone"}};
  return NameOf(kNames, s);
}

ClusterState::ClusterState(Options options, uint64_t epoch) : options_(options), epoch_(epoch) {
  Reset(epoch);
}

void ClusterState::Reset(uint64_t epoch) {
  started_.store(Clock::now().time_since_epoch().count(), std::memory_order_release);
  MutexLock lock(mu_);
  for (size_t i = 0; i < nodes_.size(); ++i) registry_.RemoveNode(static_cast<uint16_t>(i));
  nodes_.assign(1, Node{});  // index 0: the shared remote tier
  nodes_[0].reg.id = "(shared remote tier)";
  nodes_[0].state = NodeState::kGone;
  ids_.clear();
  free_.clear();
  events_applied_ = events_ignored_ = gaps_ = resyncs_ = deaths_ = rate_events_ = 0;
  rate_at_ = {};
  rate_ = 0;
  audits_.Clear();
  epoch_.store(epoch, std::memory_order_release);
}

ClusterState::Node* ClusterState::LiveLocked(const std::string& id, uint64_t incarnation) {
  auto it = ids_.find(id);
  if (it == ids_.end()) return nullptr;
  Node& n = nodes_[it->second];
  if (!n.in_use || n.reg.incarnation != incarnation || n.state == NodeState::kDead ||
      n.state == NodeState::kGone)
    return nullptr;
  return &n;
}

Result<uint16_t> ClusterState::Register(const NodeRegistration& reg, Clock::time_point now) {
  if (Status s = CheckRegistration(reg); !s.ok()) return s;
  MutexLock lock(mu_);
  uint16_t index;
  if (auto it = ids_.find(reg.id); it != ids_.end()) {
    index = it->second;
    // A restart (new incarnation) or a re-register: the node's subtree is
    // rebuilt from the inventory it sends next.
    registry_.RemoveNode(index);
  } else {
    auto free = FreeIndexLocked();
    if (!free) return Rejected("node table is full");
    index = *free;
    ids_[reg.id] = index;
  }
  Node& n = nodes_[index];
  n = Node{};
  n.in_use = true;
  n.reg = reg;
  n.state = NodeState::kAlive;
  n.last_seen = now;
  n.resync_pending = true;  // until the inventory arrives
  n.resync_asked_at = now;  // registering is asking
  return index;
}

std::optional<uint16_t> ClusterState::FreeIndexLocked() {
  if (!free_.empty()) {
    const uint16_t index = free_.back();
    free_.pop_back();
    return index;
  }
  if (nodes_.size() <= options_.max_nodes) {
    nodes_.emplace_back();
    return static_cast<uint16_t>(nodes_.size() - 1);
  }
  // Full: reclaim the node that ended longest ago, if any has.
  std::optional<uint16_t> oldest;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (n.state != NodeState::kDead && n.state != NodeState::kGone) continue;
    if (!oldest || n.ended_at < nodes_[*oldest].ended_at) oldest = static_cast<uint16_t>(i);
  }
  if (oldest) ForgetLocked(*oldest);
  if (!free_.empty()) {
    free_.pop_back();
    return oldest;
  }
  return std::nullopt;
}

void ClusterState::ForgetLocked(uint16_t index) {
  Node& n = nodes_[index];
  registry_.RemoveNode(index);  // already empty when dead or gone; cheap insurance
  ids_.erase(n.reg.id);
  n = Node{};
  free_.push_back(index);
}

size_t ClusterState::node_count() const {
  MutexLock lock(mu_);
  return ids_.size();
}

Status ClusterState::Heartbeat(const std::string& id, uint64_t incarnation, const NodeUsage& usage,
                               Clock::time_point now) {
  MutexLock lock(mu_);
  Node* n = LiveLocked(id, incarnation);
  if (!n) return NotFound("unknown node " + id + ": register again");
  n->last_seen = now;
  n->state = NodeState::kAlive;
  const auto requests = static_cast<int64_t>(std::min<uint64_t>(usage.requests, INT64_MAX));
  if (n->last_requests >= 0 && requests >= n->last_requests && now > n->last_requests_at) {
    n->load = (requests - n->last_requests) / Seconds(now - n->last_requests_at);
  }
  n->last_requests = requests;
  n->last_requests_at = now;
  n->usage = usage;
  return Status::Ok();
}

void ClusterState::ApplyLocked(uint16_t index, const Report& r, bool admit_only) {
  for (size_t i = 0; i < r.keys.size() && i < r.values.size(); ++i) {
    const auto event = DecodeEvent(r.values[i]);
    if (!event) continue;
    const Location loc{event->tier == TierKind::kRemote ? kSharedTierNode : index, event->tier};
    if (admit_only || event->admit) {
      const auto slot = static_cast<size_t>(event->owner);
      registry_.Admit(r.keys[i], loc, slot < r.owners.size() ? r.owners[slot] : kUnknownOwner);
    } else {
      registry_.Evict(r.keys[i], loc);
    }
  }
}

ClusterState::Outcome ClusterState::ApplyEvents(const std::string& id, uint64_t incarnation,
                                                uint64_t seq, const Report& report,
                                                Clock::time_point now) {
  MutexLock lock(mu_);
  Node* n = LiveLocked(id, incarnation);
  if (!n) return Outcome::kUnknownNode;
  n->last_seen = now;
  if (n->resync_pending || seq <= n->last_seq) {
    events_ignored_ += report.keys.size();
    return Outcome::kIgnored;  // superseded by the coming inventory, or a duplicate
  }
  if (seq != n->last_seq + 1) {
    gaps_++;
    events_ignored_ += report.keys.size();
    n->resync_pending = true;
    n->resync_asked_at = now;
    return Outcome::kNeedResync;
  }
  ApplyLocked(ids_[id], report, /*admit_only=*/false);
  n->last_seq = seq;
  n->events_applied += report.keys.size();
  events_applied_ += report.keys.size();
  return Outcome::kApplied;
}

ClusterState::Outcome ClusterState::ApplyInventory(const std::string& id, uint64_t incarnation,
                                                   uint64_t seq, uint64_t part, bool final,
                                                   const Report& report, Clock::time_point now) {
  MutexLock lock(mu_);
  Node* n = LiveLocked(id, incarnation);
  if (!n) return Outcome::kUnknownNode;
  n->last_seen = now;
  const uint16_t index = ids_[id];
  if (part == 0) {
    registry_.RemoveNode(index);
    n->resync_pending = true;
    n->inventory_seq = seq;
  } else if (part != n->next_inventory_part || seq != n->inventory_seq) {
    // A part went missing: what was applied is incomplete; start over.
    gaps_++;
    n->resync_pending = true;
    n->next_inventory_part = 0;
    n->resync_asked_at = now;
    return Outcome::kNeedResync;
  }
  ApplyLocked(index, report, /*admit_only=*/true);
  n->next_inventory_part = part + 1;
  if (final) {
    n->last_seq = seq;
    n->resync_pending = false;
    n->next_inventory_part = 0;
    resyncs_++;
  }
  return Outcome::kApplied;
}

bool ClusterState::TakeResyncRequest(const std::string& id, uint64_t incarnation,
                                     Clock::time_point now) {
  MutexLock lock(mu_);
  Node* n = LiveLocked(id, incarnation);
  if (!n || !n->resync_pending || now - n->resync_asked_at < options_.suspect_after) return false;
  n->resync_asked_at = now;
  return true;
}

Status ClusterState::Deregister(const std::string& id, uint64_t incarnation) {
  MutexLock lock(mu_);
  Node* n = LiveLocked(id, incarnation);
  if (!n) return NotFound("unknown node " + id);
  registry_.RemoveNode(ids_[id]);
  n->state = NodeState::kGone;
  n->ended_at = Clock::now();
  return Status::Ok();
}

void ClusterState::KillLocked(uint16_t index, Clock::time_point now) {
  registry_.RemoveNode(index);
  nodes_[index].state = NodeState::kDead;
  nodes_[index].ended_at = now;
  deaths_++;
}

ClusterState::TickResult ClusterState::Tick(Clock::time_point now) {
  MutexLock lock(mu_);
  TickResult out;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    Node& n = nodes_[i];
    if (!n.in_use) continue;
    if (n.state == NodeState::kDead || n.state == NodeState::kGone) {
      if (now - n.ended_at > options_.forget_after) {
        out.forgotten.push_back(n.reg.id);
        ForgetLocked(static_cast<uint16_t>(i));
      }
      continue;
    }
    const auto silent = now - n.last_seen;
    if (silent > options_.dead_after) {
      KillLocked(static_cast<uint16_t>(i), now);
      out.died.push_back(n.reg.id);
    } else if (silent > options_.suspect_after) {
      n.state = NodeState::kSuspect;
    }
  }
  // Events/s over the last window of at least 1 s: advanced here, on the
  // controller's clock, so that reading the stats changes nothing.
  if (rate_at_ == Clock::time_point{}) {
    rate_at_ = now;
    rate_events_ = events_applied_;
  } else if (now - rate_at_ >= std::chrono::seconds(1)) {
    rate_ = (events_applied_ - rate_events_) / Seconds(now - rate_at_);
    rate_at_ = now;
    rate_events_ = events_applied_;
  }
  return out;
}

std::vector<Replica> ClusterState::Locate(const ChunkKey& key, const std::string& host,
                                          Registry::Provenance* provenance) const {
  std::vector<Location> locations;
  const Registry::Provenance p = registry_.Locate(key, locations);
  if (provenance) *provenance = p;
  MutexLock lock(mu_);
  struct Ranked {
    std::tuple<bool, bool, int, double> cost;
    Replica replica;
  };
  std::vector<Ranked> ranked;
  for (const Location& loc : locations) {
    if (loc.node >= nodes_.size()) continue;
    const Node& n = nodes_[loc.node];
    if (loc.node != kSharedTierNode && !n.in_use) continue;
    Replica r{loc, n.reg.id, n.reg.host, n.reg.tcp, n.reg.ipc};
    const bool shared = loc.node == kSharedTierNode;
    const bool suspect = !shared && n.state != NodeState::kAlive;
    const bool other_host = shared || n.reg.host != host;
    ranked.push_back({{suspect, other_host, static_cast<int>(loc.tier), n.load}, std::move(r)});
  }
  std::sort(ranked.begin(), ranked.end(),
            [](const Ranked& a, const Ranked& b) { return a.cost < b.cost; });
  std::vector<Replica> out;
  for (auto& r : ranked) out.push_back(std::move(r.replica));
  return out;
}

std::vector<NodeScore> ClusterState::Score(std::span<const ChunkKey> keys,
                                           std::span<const int64_t> tokens, const Visible& visible,
                                           std::span<const std::string> only) const {
  std::vector<ScoredChunk> chunks(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    chunks[i].tokens = i < tokens.size() && tokens[i] > 0 ? static_cast<uint64_t>(tokens[i]) : 1;
    const Registry::Provenance p = registry_.Locate(keys[i], chunks[i].locations);
    if (!visible(p)) chunks[i].locations.clear();
  }
  std::vector<NodeScore> candidates;
  std::vector<bool> alive;
  {
    MutexLock lock(mu_);
    alive.resize(nodes_.size());
    for (size_t i = 1; i < nodes_.size(); ++i) {
      const Node& n = nodes_[i];
      alive[i] = n.in_use && n.state == NodeState::kAlive;
      if (!alive[i] && !(n.in_use && n.state == NodeState::kSuspect)) continue;
      if (!only.empty() && std::find(only.begin(), only.end(), n.reg.id) == only.end()) continue;
      candidates.push_back({.index = static_cast<uint16_t>(i),
                            .id = n.reg.id,
                            .host = n.reg.host,
                            .alive = alive[i],
                            .requests_per_second = n.load});
    }
  }
  ScoreChunkSet(chunks, alive, candidates);
  return candidates;
}

std::vector<NodeView> ClusterState::Nodes(Clock::time_point now) const {
  MutexLock lock(mu_);
  std::vector<NodeView> out;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (!n.in_use) continue;
    NodeView v;
    v.index = static_cast<uint16_t>(i);
    v.reg = n.reg;
    v.state = n.state;
    v.resync_pending = n.resync_pending;
    v.last_seq = n.last_seq;
    v.events_applied = n.events_applied;
    v.seconds_since_heartbeat = Seconds(now - n.last_seen);
    v.usage = n.usage;
    for (int t = 0; t < kNumTiers; ++t)
      v.chunks[t] = registry_.CountOn(v.index, static_cast<TierKind>(t));
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<std::pair<uint16_t, std::string>> ClusterState::LiveNodes(
    const std::string& only_id) const {
  MutexLock lock(mu_);
  std::vector<std::pair<uint16_t, std::string>> out;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (!n.in_use) continue;
    if (n.state != NodeState::kAlive && n.state != NodeState::kSuspect) continue;
    if (!only_id.empty() && n.reg.id != only_id) continue;
    out.emplace_back(static_cast<uint16_t>(i), n.reg.id);
  }
  return out;
}

ClusterStats ClusterState::Stats() const {
  MutexLock lock(mu_);
  ClusterStats s;
  s.audits = audits_.Stats();
  for (size_t i = 1; i < nodes_.size(); ++i) {
    if (!nodes_[i].in_use) continue;
    switch (nodes_[i].state) {
      case NodeState::kAlive:
        s.nodes_alive++;
        break;
      case NodeState::kSuspect:
        s.nodes_suspect++;
        break;
      case NodeState::kDead:
        s.nodes_dead++;
        break;
      case NodeState::kGone:
        break;
    }
  }
  s.keys = registry_.keys();
  s.locations = registry_.locations();
  s.registry_bytes = registry_.MemoryBytes();
  s.shared_tier_chunks = registry_.CountOn(kSharedTierNode, TierKind::kRemote);
  s.events_applied = events_applied_;
  s.events_ignored = events_ignored_;
  s.gaps = gaps_;
  s.resyncs = resyncs_;
  s.deaths = deaths_;
  s.events_per_second = rate_;
  return s;
}

}  // namespace pikv::controller
