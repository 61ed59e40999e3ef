#include "pikv/node/location_memory.h"

#include <algorithm>

namespace pikv::node {

void LocationMemory::Remember(std::span<const ChunkKey> keys,
                              const std::vector<std::vector<Replica>>& copies) {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < keys.size() && i < copies.size(); ++i) {
    std::vector<Replica> held;
    for (const Replica& c : copies[i]) {
      if (c.location.tier == TierKind::kRemote) continue;  // the node reads Redis itself
      held.push_back(c);
      if (!node_at_.contains(c.tcp) && node_at_.size() >= kMaxKnownNodes) node_at_.clear();
      node_at_[c.tcp] = c.node_id;
      auto same = std::find_if(peers_.begin(), peers_.end(),
                               [&](const Replica& p) { return p.node_id == c.node_id; });
      if (same != peers_.end()) peers_.erase(same);
      peers_.insert(peers_.begin(), c);
      if (peers_.size() > kMaxPeers) peers_.pop_back();
    }
    // No copy named: what was seen before stays (Recall is asked then).
    if (held.empty()) continue;
    auto it = by_key_.find(keys[i]);
    if (it != by_key_.end()) ages_.erase(it->second.age);
    ages_.push_front(keys[i]);
    by_key_[keys[i]] = Entry{std::move(held), ages_.begin()};
    if (by_key_.size() > max_keys_) {
      by_key_.erase(ages_.back());
      ages_.pop_back();
    }
  }
}

std::vector<std::vector<Replica>> LocationMemory::Recall(std::span<const ChunkKey> keys,
                                                         bool peers_for_unknown) const {
  std::lock_guard lock(mu_);
  std::vector<std::vector<Replica>> out(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    auto it = by_key_.find(keys[i]);
    if (it != by_key_.end())
      out[i] = it->second.copies;
    else if (peers_for_unknown)
      out[i] = peers_;
  }
  return out;
}

std::string LocationMemory::NodeAt(const std::string& tcp) const {
  std::lock_guard lock(mu_);
  auto it = node_at_.find(tcp);
  return it == node_at_.end() ? std::string() : it->second;
}

size_t LocationMemory::size() const {
  std::lock_guard lock(mu_);
  return by_key_.size();
}

}  // namespace pikv::node
