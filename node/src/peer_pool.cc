#include "peer_pool.h"

namespace pikv::node {

namespace {

const std::string& ServerKey(const std::optional<CurveClientKeys>& curve) {
  static const std::string kNone;
  return curve ? curve->server_key : kNone;
}

}  // namespace

PeerPool::Lease PeerPool::Acquire(const std::string& endpoint,
                                  const std::optional<CurveClientKeys>& curve) {
  {
    std::lock_guard lock(mu_);
    for (auto it = idle_.begin(); it != idle_.end(); ++it) {
      if ((*it)->endpoint() == endpoint && ServerKey((*it)->curve()) == ServerKey(curve)) {
        auto rpc = std::move(*it);
        idle_.erase(it);
        return Lease(this, std::move(rpc));
      }
    }
  }
  return Lease(this, std::make_unique<RpcClient>(endpoint, WireLimits{}, curve));
}

void PeerPool::Release(std::unique_ptr<RpcClient> rpc) {
  if (!rpc->status().ok()) return;     // an endpoint that never connects is not kept
  std::unique_ptr<RpcClient> dropped;  // closed outside the lock
  std::lock_guard lock(mu_);
  idle_.push_front(std::move(rpc));
  if (idle_.size() > max_idle_) {
    dropped = std::move(idle_.back());
    idle_.pop_back();
  }
}

size_t PeerPool::idle() const {
  std::lock_guard lock(mu_);
  return idle_.size();
}

}  // namespace pikv::node
