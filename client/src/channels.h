// Channels: the connections a Client holds, and how each is dialled.
//
// The local node (ipc or tcp), the controller (a list or etcd:// spec),
// peers dialled directly while the local node is down, and the local node's
// zero-copy channel, which a failed connect leaves down for a second (the
// client copies meanwhile) rather than retrying on every call. The
// controller is dialled twice: the plan's locate is asked by the Locator's
// thread (within a budget), other calls on the Client's. Over tcp each
// is dialled over CURVE when security is on, with the key the keyring lists
// for that server (CurveFor).
// Thread-safety: none; one Client's thread at a time, like the Client.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "locator.h"
#include "pikv/client/client.h"
#include "pikv/rpc/admin_client.h"
#include "pikv/rpc/node_client.h"
#include "pikv/rpc/zero_copy_client.h"

namespace pikv::client {

// The keys to dial `endpoint`: node `node_id`'s, or the controller's when
// node_id is null. nullopt when none are needed (security off, ipc) or the
// keyring lacks them: that server then refuses the connection, a miss
// (CheckClientSecurity catches a missing local node or controller key).
std::optional<CurveClientKeys> CurveFor(const ClientOptions& o, const std::string& endpoint,
                                        const std::string* node_id);

class Channels {
 public:
  // `options` is the owning Client's and outlives this.
  explicit Channels(const ClientOptions& options);

  rpc::NodeClient* local() { return local_.get(); }             // null: no local node configured
  rpc::AdminClient* controller() { return controller_.get(); }  // null: no controller
  Locator* locator() { return locator_.get(); }                 // null: no controller

  // A direct connection to the peer node at `endpoint` (node `peer_id`),
  // dialled with `timeout` the first time and kept until DropPeer.
  rpc::NodeClient& Peer(const std::string& endpoint, const std::string& peer_id,
                        std::chrono::milliseconds timeout);
  void DropPeer(const std::string& endpoint);  // it failed: reconnect next time

  // The zero-copy channel, (re)connected when due; null when there is none.
  std::shared_ptr<rpc::ZeroCopyClient> ZeroCopy();

  // A put of `object` into the local node on a connection of its own, so
  // that it is safe to run on another thread beside this client's calls.
  std::function<Status()> PutOnItsOwn(ChunkKey key, SharedBuffer object) const;

 private:
  const ClientOptions& options_;
  std::unique_ptr<rpc::NodeClient> local_;
  std::unique_ptr<rpc::AdminClient> controller_;
  std::unique_ptr<Locator> locator_;
  std::map<std::string, std::unique_ptr<rpc::NodeClient>>
      peers_;                   // direct, when the local node is down
  std::string zero_copy_path_;  // empty: the local node has no zero-copy channel for us
  std::shared_ptr<rpc::ZeroCopyClient> zero_copy_;
  std::chrono::steady_clock::time_point zero_copy_retry_{};
};

}  // namespace pikv::client
