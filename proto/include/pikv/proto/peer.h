// Who sent a message: the role and name a server's ZAP handler admitted
// its key as (transport/curve.h), in the user id ZeroMQ attaches to each
// message. What each role may send is the permissions table
// (permissions.h); a sender's tenant scopes what an engine may reach.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pikv {

enum class Role : uint8_t { kAdmin, kEngine, kNode, kController };

inline constexpr std::string_view kDefaultEngineName = "engine";

struct CurvePeer {
  Role role = Role::kEngine;
  std::string node_id;                                 // kNode only
  std::string name = std::string(kDefaultEngineName);  // kEngine only
  std::string tenant;                                  // kEngine only; "" = the default tenant
  std::string UserId() const;
  friend bool operator==(const CurvePeer&, const CurvePeer&) = default;
};
// The peer a user id names; nullopt for anything UserId does not write.
std::optional<CurvePeer> ParseUserId(std::string_view user_id);

}  // namespace pikv
