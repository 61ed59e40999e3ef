// PeerPool: ZeroMQ client connections to other pikv processes (peer nodes,
// the controller), shared by a node's pull threads.
//
// A connection is lent to one thread at a time (RpcClient is not
// thread-safe) and comes back when its Lease ends; a lease whose call failed
// is discarded, so the next one reconnects. At most `max_idle` connections
// are kept between pulls, least recently used dropped first, so however many
// endpoints a node hears of, it holds at most max_idle + (pull threads)
// sockets.
// Thread-safety: Acquire from any thread; a Lease belongs to its thread.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "pikv/transport/rpc_client.h"

namespace pikv::node {

class PeerPool {
 public:
  explicit PeerPool(size_t max_idle) : max_idle_(max_idle) {}

  class Lease {
   public:
    Lease(PeerPool* pool, std::unique_ptr<RpcClient> rpc) : pool_(pool), rpc_(std::move(rpc)) {}
    Lease(Lease&&) = default;
    ~Lease() {
      if (rpc_) pool_->Release(std::move(rpc_));
    }
    RpcClient& operator*() { return *rpc_; }
    RpcClient* operator->() { return rpc_.get(); }
    void Discard() { rpc_.reset(); }

   private:
    PeerPool* pool_;
    std::unique_ptr<RpcClient> rpc_;
  };

  // A connection to `endpoint`, over CURVE with `curve` keys if given; an
  // idle one is reused only if it dials the same server key.
  Lease Acquire(const std::string& endpoint, const std::optional<CurveClientKeys>& curve);
  size_t idle() const;

 private:
  void Release(std::unique_ptr<RpcClient> rpc);

  const size_t max_idle_;
  mutable std::mutex mu_;
  std::list<std::unique_ptr<RpcClient>> idle_;  // most recently used first; guarded by mu_
};

}  // namespace pikv::node
