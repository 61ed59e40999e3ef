// FakeNode: speaks the node-to-controller protocol over a DEALER (RpcClient)
// without being a node: registers whatever it is told to, and claims an
// inventory. Cheap enough to stand for many nodes in one test.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "pikv/proto/control_wire.h"
#include "pikv/proto/location.h"
#include "pikv/proto/tier_kind.h"
#include "pikv/transport/rpc_client.h"

namespace pikv::testing {

class FakeNode {
 public:
  FakeNode(const std::string& controller, std::string id,
           std::optional<CurveClientKeys> keys = std::nullopt)
      : rpc_(controller, WireLimits{}, std::move(keys)), id_(std::move(id)) {}
  Result<Message> Register(const std::string& tcp, const std::string& host = "fake-host") {
    Message m;
    m.header = EncodeRegister({id_, host, tcp, {}, 1});
    return rpc_.Call(std::move(m), std::chrono::seconds(2));
  }
  // Claims to hold `keys` in CPU (no reply comes: the short wait is expected).
  void Inventory(const std::vector<ChunkKey>& keys) {
    NodeReport inventory{id_, 1};
    inventory.final = true;
    inventory.keys = keys;
    inventory.values.assign(keys.size(), EncodeHeld(TierKind::kCpu));
    Message m;
    m.header = EncodeReport(MsgType::kInventory, std::move(inventory));
    rpc_.Call(std::move(m), std::chrono::milliseconds(50)).status().IgnoreError();
  }

 private:
  RpcClient rpc_;
  std::string id_;
};

}  // namespace pikv::testing
