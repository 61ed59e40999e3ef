#include "pikv/controller/cluster_state.h"

#include <algorithm>
#include <tuple>

namespace pikv::controller {

namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

std::string_view NodeStateName(NodeState s) {
  switch (s) {
    case NodeState::kAlive:
      return "alive";
    case NodeState::kSuspect:
      return "suspect";
    case NodeState::kDead:
      return "dead";
    case NodeState::kGone:
      return "gone";
  }
  return "?";
}

ClusterState::ClusterState(Options options, uint64_t epoch) : options_(options), epoch_(epoch) {
  nodes_.resize(1);  // index 0: the shared remote tier
  nodes_[0].reg.id = "(shared remote tier)";
  nodes_[0].state = NodeState::kGone;
}

ClusterState::Node* ClusterState::LiveLocked(const std::string& id, uint64_t incarnation) {
  auto it = ids_.find(id);
  if (it == ids_.end()) return nullptr;
  Node& n = nodes_[it->second];
  if (n.reg.incarnation != incarnation || n.state == NodeState::kDead ||
      n.state == NodeState::kGone)
    return nullptr;
  return &n;
}

Result<uint16_t> ClusterState::Register(const NodeRegistration& reg, Clock::time_point now) {
  if (reg.id.empty()) return InvalidArgument("register without a node id");
  std::lock_guard lock(mu_);
  uint16_t index;
  if (auto it = ids_.find(reg.id); it != ids_.end()) {
    index = it->second;
    // A restart (new incarnation) or a re-register: the node's subtree is
    // rebuilt from the inventory it sends next.
    registry_.RemoveNode(index);
  } else {
    if (nodes_.size() > Registry::kMaxNodes) return Rejected("node table is full");
    index = static_cast<uint16_t>(nodes_.size());
    nodes_.emplace_back();
    ids_[reg.id] = index;
  }
  Node& n = nodes_[index];
  n = Node{};
  n.reg = reg;
  n.state = NodeState::kAlive;
  n.last_seen = now;
  n.resync_pending = true;  // until the inventory arrives
  return index;
}

Status ClusterState::Heartbeat(const std::string& id, uint64_t incarnation, Fields usage,
                               Clock::time_point now) {
  std::lock_guard lock(mu_);
  Node* n = LiveLocked(id, incarnation);
  if (!n) return NotFound("unknown node " + id + ": register again");
  n->last_seen = now;
  n->state = NodeState::kAlive;
  int64_t requests = FieldInt(usage, "requests", -1);
  if (requests >= 0 && n->last_requests >= 0 && now > n->last_requests_at) {
    n->load = (requests - n->last_requests) / Seconds(now - n->last_requests_at);
  }
  n->last_requests = requests;
  n->last_requests_at = now;
  n->usage = std::move(usage);
  return Status::Ok();
}

void ClusterState::ApplyLocked(uint16_t index, std::span<const ChunkKey> keys,
                               std::span<const int64_t> values, bool admit_only) {
  for (size_t i = 0; i < keys.size() && i < values.size(); ++i) {
    const auto tier = static_cast<TierKind>(values[i] & 0xf);
    if (static_cast<int>(tier) >= kNumTiers) continue;
    const bool admit = admit_only || (values[i] >> 4) == 1;
    const Location loc{tier == TierKind::kRemote ? kSharedTierNode : index, tier};
    if (admit) {
      registry_.Admit(keys[i], loc);
    } else {
      registry_.Evict(keys[i], loc);
    }
  }
}

ClusterState::Outcome ClusterState::ApplyEvents(const std::string& id, uint64_t incarnation,
                                                uint64_t seq, std::span<const ChunkKey> keys,
                                                std::span<const int64_t> values,
                                                Clock::time_point now) {
  std::lock_guard lock(mu_);
  Node* n = LiveLocked(id, incarnation);
  if (!n) return Outcome::kUnknownNode;
  n->last_seen = now;
  if (n->resync_pending || seq <= n->last_seq) {
    events_ignored_ += keys.size();
    return Outcome::kIgnored;  // superseded by the coming inventory, or a duplicate
  }
  if (seq != n->last_seq + 1) {
    gaps_++;
    events_ignored_ += keys.size();
    n->resync_pending = true;
    return Outcome::kNeedResync;
  }
  ApplyLocked(ids_[id], keys, values, /*admit_only=*/false);
  n->last_seq = seq;
  n->events_applied += keys.size();
  events_applied_ += keys.size();
  return Outcome::kApplied;
}

ClusterState::Outcome ClusterState::ApplyInventory(const std::string& id, uint64_t incarnation,
                                                   uint64_t seq, uint64_t part, bool final,
                                                   std::span<const ChunkKey> keys,
                                                   std::span<const int64_t> values,
                                                   Clock::time_point now) {
  std::lock_guard lock(mu_);
  Node* n = LiveLocked(id, incarnation);
  if (!n) return Outcome::kUnknownNode;
  n->last_seen = now;
  const uint16_t index = ids_[id];
  if (part == 0) registry_.RemoveNode(index);
  ApplyLocked(index, keys, values, /*admit_only=*/true);
  if (final) {
    n->last_seq = seq;
    n->resync_pending = false;
    resyncs_++;
  }
  return Outcome::kApplied;
}

Status ClusterState::Deregister(const std::string& id, uint64_t incarnation) {
  std::lock_guard lock(mu_);
  Node* n = LiveLocked(id, incarnation);
  if (!n) return NotFound("unknown node " + id);
  registry_.RemoveNode(ids_[id]);
  n->state = NodeState::kGone;
  return Status::Ok();
}

void ClusterState::KillLocked(uint16_t index) {
  registry_.RemoveNode(index);
  nodes_[index].state = NodeState::kDead;
  deaths_++;
}

std::vector<std::string> ClusterState::Tick(Clock::time_point now) {
  std::lock_guard lock(mu_);
  std::vector<std::string> died;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    Node& n = nodes_[i];
    if (n.state != NodeState::kAlive && n.state != NodeState::kSuspect) continue;
    const auto silent = now - n.last_seen;
    if (silent > options_.dead_after) {
      KillLocked(static_cast<uint16_t>(i));
      died.push_back(n.reg.id);
    } else if (silent > options_.suspect_after) {
      n.state = NodeState::kSuspect;
    }
  }
  return died;
}

std::vector<Replica> ClusterState::Locate(const ChunkKey& key, const std::string& host) const {
  std::vector<Location> locations;
  registry_.Locate(key, locations);
  std::lock_guard lock(mu_);
  struct Ranked {
    std::tuple<bool, bool, int, double> cost;
    Replica replica;
  };
  std::vector<Ranked> ranked;
  for (const Location& loc : locations) {
    if (loc.node >= nodes_.size()) continue;
    const Node& n = nodes_[loc.node];
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

std::vector<NodeView> ClusterState::Nodes(Clock::time_point now) const {
  std::lock_guard lock(mu_);
  std::vector<NodeView> out;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
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
  std::lock_guard lock(mu_);
  std::vector<std::pair<uint16_t, std::string>> out;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (n.state != NodeState::kAlive && n.state != NodeState::kSuspect) continue;
    if (!only_id.empty() && n.reg.id != only_id) continue;
    out.emplace_back(static_cast<uint16_t>(i), n.reg.id);
  }
  return out;
}

ClusterStats ClusterState::Stats(Clock::time_point now) const {
  std::lock_guard lock(mu_);
  ClusterStats s;
  for (size_t i = 1; i < nodes_.size(); ++i) {
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
  s.events_applied = events_applied_;
  s.events_ignored = events_ignored_;
  s.gaps = gaps_;
  s.resyncs = resyncs_;
  s.deaths = deaths_;
  // Events/s over the interval since the previous Stats call (at least 1 s).
  if (rate_at_ == Clock::time_point{}) {
    rate_at_ = now;
    rate_events_ = events_applied_;
  } else if (now - rate_at_ >= std::chrono::seconds(1)) {
    rate_ = (events_applied_ - rate_events_) / Seconds(now - rate_at_);
    rate_at_ = now;
    rate_events_ = events_applied_;
  }
  s.events_per_second = rate_;
  return s;
}

}  // namespace pikv::controller
