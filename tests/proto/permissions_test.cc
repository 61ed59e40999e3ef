// The one permission table: what it allows and refuses, default deny, and
// docs/security.md showing exactly it.
#include "pikv/proto/permissions.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace pikv {
namespace {

Header Of(MsgType type, const std::string& node_id = "") {
  Header h;
  h.type = type;
  if (!node_id.empty()) h.fields["node_id"] = node_id;
  return h;
}

TEST(PermissionsTest, RolesGetWhatTheTableListsAndNothingElse) {
  const CurvePeer admin{Role::kAdmin, ""}, engine{Role::kEngine, ""}, node{Role::kNode, "a"},
      controller{Role::kController, ""};
  EXPECT_TRUE(Authorize(Server::kNode, &admin, Of(MsgType::kClear)).ok());
  EXPECT_EQ(Authorize(Server::kNode, &engine, Of(MsgType::kDelete)).code(),
            ErrorCode::kPermissionDenied);
  EXPECT_EQ(Authorize(Server::kNode, &node, Of(MsgType::kPut)).code(),
            ErrorCode::kPermissionDenied);
  EXPECT_TRUE(Authorize(Server::kNode, &node, Of(MsgType::kGet)).ok());  // a peer's pull
  EXPECT_TRUE(Authorize(Server::kNode, &engine, Of(MsgType::kPut)).ok());
  // A node speaks for itself only; no other role speaks for a node.
  EXPECT_TRUE(Authorize(Server::kController, &node, Of(MsgType::kRegister, "a")).ok());
  EXPECT_EQ(Authorize(Server::kController, &node, Of(MsgType::kHeartbeat, "b")).code(),
            ErrorCode::kPermissionDenied);
  EXPECT_EQ(Authorize(Server::kController, &admin, Of(MsgType::kEvents, "a")).code(),
            ErrorCode::kPermissionDenied);
  // Audits are reported by engines; revocations are the admin's.
  EXPECT_TRUE(Authorize(Server::kController, &engine, Of(MsgType::kAuditMismatch)).ok());
  for (const CurvePeer* p : {&admin, &node, &controller})
    EXPECT_FALSE(Authorize(Server::kController, p, Of(MsgType::kAuditMismatch)).ok());
  EXPECT_FALSE(Authorize(Server::kController, &engine, Of(MsgType::kAdminRevoke)).ok());
  // Default deny: a type a server does not answer is refused there, to
  // everyone, the trusted sender too (the node's revoke comes over its own
  // connection to the controller, never to its server).
  for (const CurvePeer* p : {&admin, &engine, &node, &controller, (const CurvePeer*)nullptr}) {
    for (auto [server, type] :
         {std::pair{Server::kNode, MsgType::kRevoke}, std::pair{Server::kNode, MsgType::kLocate},
          std::pair{Server::kNode, MsgType::kLease}, std::pair{Server::kController, MsgType::kGet},
          std::pair{Server::kController, MsgType::kResync},
          std::pair{Server::kNode, static_cast<MsgType>(999)}})
      EXPECT_EQ(Authorize(server, p, Of(type)).code(), ErrorCode::kUnsupported)
          << MsgTypeName(type);
  }
  // The trusted sender (security off, ipc) may send whatever is listed.
  for (const Permission& p : Permissions())
    EXPECT_TRUE(Authorize(p.server, nullptr, Of(p.type)).ok()) << MsgTypeName(p.type);
}

// The table's tenant flag is what scopes a request: an engine's reads,
// writes, locates and reports act within its tenant; the rest, and every
// other sender, are not scoped.
TEST(PermissionsTest, AnEnginesTenantScopedRequestsActWithinItsTenant) {
  const CurvePeer engine{Role::kEngine, "", "e1", "acme"}, admin{Role::kAdmin},
      node{Role::kNode, "a"};
  for (const Permission& p : Permissions()) {
    const std::string* tenant = TenantScope(p.server, &engine, p.type);
    EXPECT_EQ(tenant != nullptr, p.tenant_scoped) << MsgTypeName(p.type);
    if (tenant) {
      EXPECT_EQ(*tenant, "acme");
    }
    for (const CurvePeer* other : {&admin, &node, static_cast<const CurvePeer*>(nullptr)})
      EXPECT_EQ(TenantScope(p.server, other, p.type), nullptr) << MsgTypeName(p.type);
  }
  // What reads, writes, locates or reports an engine's data must be scoped
  // (a row that loses its flag would let an engine act in another tenant).
  for (MsgType t : {MsgType::kExists, MsgType::kGet, MsgType::kPut, MsgType::kPull})
    EXPECT_NE(TenantScope(Server::kNode, &engine, t), nullptr) << MsgTypeName(t);
  for (MsgType t : {MsgType::kLocate, MsgType::kAuditMismatch})
    EXPECT_NE(TenantScope(Server::kController, &engine, t), nullptr) << MsgTypeName(t);
  EXPECT_EQ(TenantScope(Server::kNode, &engine, MsgType::kStats), nullptr);
  EXPECT_EQ(TenantScope(Server::kController, &engine, MsgType::kGet), nullptr);  // not listed
}

TEST(PermissionsTest, EveryTypeAppearsOncePerServerForClientRolesOnly) {
  for (const Permission& p : Permissions()) {
    EXPECT_EQ(PermissionFor(p.server, p.type), &p) << MsgTypeName(p.type);
    EXPECT_NE(p.roles, 0) << MsgTypeName(p.type);
    EXPECT_EQ(p.roles & RoleBit(Role::kController), 0) << "a controller's key is a server's";
  }
}

TEST(PermissionsTest, DocsSecurityShowsTheTableAsItIs) {
  std::ifstream in(PIKV_SOURCE_DIR "/docs/security.md");
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const std::string begin = "<!-- permissions: begin (PermissionsMarkdown) -->\n",
                    end = "<!-- permissions: end -->";
  const size_t a = doc.find(begin), b = doc.find(end);
  ASSERT_NE(a, std::string::npos) << "docs/security.md has no permissions block";
  ASSERT_NE(b, std::string::npos);
  EXPECT_EQ(doc.substr(a + begin.size(), b - a - begin.size()), PermissionsMarkdown())
      << "docs/security.md: put this table between the markers:\n"
      << PermissionsMarkdown();
}

}  // namespace
}  // namespace pikv
