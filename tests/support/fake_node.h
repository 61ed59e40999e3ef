// FakeNode: speaks the node-to-controller protocol over a DEALER (RpcClient)
// without being a node: registers whatever it is told to, and claims an
// inventory. Cheap enough to stand for many nodes in one test.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "pikv/proto/rpc_client.h"
#include "pikv/proto/tier_kind.h"

namespace pikv::testing {

class FakeNode {
 public:
  FakeNode(const std::string& controller, std::string id,
           std::optional<CurveClientKeys> keys = std::nullopt)
      : rpc_(controller, WireLimits{}, std::move(keys)), id_(std::move(id)) {}
  Result<Message> Register(const std::string& tcp, const std::string& host = "fake-host") {
    Message m;
    m.header.type = MsgType::kRegister;
    m.header.fields = {{"node_id", id_},
                       {"incarnation", int64_t{1}},
                       {"host", host},
                       {"tcp", tcp},
                       {"ipc", std::string()}};
    return rpc_.Call(std::move(m), std::chrono::seconds(2));
  }
  // Claims to hold `keys` in CPU (no reply comes: the short wait is expected).
  void Inventory(const std::vector<ChunkKey>& keys) {
    Message m;
    m.header.type = MsgType::kInventory;
    m.header.keys = keys;
    m.header.values.assign(keys.size(), static_cast<int64_t>(TierKind::kCpu));
    m.header.fields = {{"node_id", id_},
                       {"incarnation", int64_t{1}},
                       {"seq", int64_t{0}},
                       {"part", int64_t{0}},
                       {"final", int64_t{1}}};
    rpc_.Call(std::move(m), std::chrono::milliseconds(50)).status().IgnoreError();
  }

 private:
  RpcClient rpc_;
  std::string id_;
};

}  // namespace pikv::testing
