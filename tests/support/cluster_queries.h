// Questions tests ask a running controller, answered through AdminClient:
// how many nodes are alive, and which nodes hold a key in CPU or disk.
// Header-only; include from tests that link pikv_controller.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "pikv/coord/find_controllers.h"
#include "pikv/rpc/admin_client.h"
#include "pikv/transport/rpc_client.h"

namespace pikv::testing {

// Alive nodes, or -1 when the controller does not answer.
inline int AliveNodes(const std::string& controller,
                      std::optional<CurveClientKeys> keys = std::nullopt) {
  rpc::AdminClient admin(coord::FindControllers(controller), std::chrono::seconds(1),
                         std::move(keys));
  auto j = admin.Json(MsgType::kAdminHealth);
  return j.ok() ? nlohmann::json::parse(*j)["nodes_alive"].get<int>() : -1;
}

// Ids of the nodes holding `key` in CPU or disk (the remote tier excluded).
inline std::set<std::string> Holders(const std::string& controller, const ChunkKey& key,
                                     std::optional<CurveClientKeys> keys = std::nullopt) {
  rpc::AdminClient admin(coord::FindControllers(controller), std::chrono::seconds(1),
                         std::move(keys));
  auto r = admin.Locate({key});
  std::set<std::string> out;
  if (!r.ok()) return out;
  for (const auto& rep : (*r)[0]) {
    if (rep.location.tier != TierKind::kRemote) out.insert(rep.node_id);
  }
  return out;
}

// What the controller at `endpoint` answers for itself, following no
// redirect: "leader" (or alone), "standby" (kNotLeader), "" when silent.
inline std::string ControllerRole(const std::string& endpoint,
                                  std::optional<CurveClientKeys> keys = std::nullopt) {
  RpcClient rpc(endpoint, {}, std::move(keys));
  Message req;
  req.header.type = MsgType::kAdminHealth;
  auto reply = rpc.Call(std::move(req), std::chrono::milliseconds(300));
  if (!reply.ok()) return "";
  if (reply->header.status == ErrorCode::kNotLeader) return "standby";
  return reply->header.status == ErrorCode::kOk ? "leader" : "";
}

}  // namespace pikv::testing
