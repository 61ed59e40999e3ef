#include "pikv/proto/peer.h"

#include <utility>

#include "pikv/proto/owner.h"

namespace pikv {

std::string CurvePeer::UserId() const {
  switch (role) {
    case Role::kAdmin:
      return "admin";
    case Role::kEngine:
      return "engine:" + name + "@" + tenant;
    case Role::kNode:
      return "node:" + node_id;
    case Role::kController:
      return "controller";
  }
  return "";
}

namespace {
// The name and tenant keep their defaults (the default engine's).
CurvePeer PeerOf(Role role, std::string node_id = "") {
  CurvePeer peer;
  peer.role = role;
  peer.node_id = std::move(node_id);
  return peer;
}
}  // namespace

std::optional<CurvePeer> ParseUserId(std::string_view user_id) {
  if (user_id == "admin") return PeerOf(Role::kAdmin);
  if (user_id == "engine") return PeerOf(Role::kEngine);  // before engines had names
  if (user_id.starts_with("engine:")) {
    const std::string_view rest = user_id.substr(7);
    const auto at = rest.find('@');
    if (at == std::string_view::npos) return std::nullopt;
    CurvePeer peer{Role::kEngine, "", std::string(rest.substr(0, at)),
                   std::string(rest.substr(at + 1))};
    if (!IsIdentityName(peer.name) || !IsTenantName(peer.tenant)) return std::nullopt;
    return peer;
  }
  if (user_id.starts_with("node:") && user_id.size() > 5)
    return PeerOf(Role::kNode, std::string(user_id.substr(5)));
  return std::nullopt;
}

}  // namespace pikv
