#include "pikv/proto/permissions.h"

#include <algorithm>

namespace pikv {

namespace {

constexpr uint8_t kAdmin = RoleBit(Role::kAdmin), kEngine = RoleBit(Role::kEngine),
                  kNode = RoleBit(Role::kNode);
// The controller's key is a server's: the ZAP handler never admits it as a client.
constexpr uint8_t kAnyClient = kAdmin | kEngine | kNode;

using enum MsgType;
constexpr Server N = Server::kNode, C = Server::kController;
constexpr Scope kAny = Scope::kAny, kOwn = Scope::kOwnNode;

// Everything either server answers; nothing else is. Controller commands to
// a node (resync, clear, delete, revoke) travel over the node's own
// connection to the controller it dialed under the controller's key, not to
// its server, so they are not here.
constexpr Permission kTable[] = {
    {N, kPing, kAnyClient, kAny, false, "liveness"},
    {N, kStats, kAnyClient, kAny, false, "the node's counters"},
    {N, kExists, kAdmin | kEngine | kNode, kAny, true, "which tiers hold keys"},
    {N, kGet, kAdmin | kEngine | kNode, kAny, true, "objects (peers' pulls get them too)"},
    {N, kPut, kAdmin | kEngine, kAny, true, "store objects (content-verified)"},
    {N, kPull, kAdmin | kEngine, kAny, true, "fetch keys from a peer node into this one"},
    {N, kDelete, kAdmin, kAny, false, "drop keys from every tier"},
    {N, kPin, kAdmin, kAny, false, "keep keys from eviction"},
    {N, kUnpin, kAdmin, kAny, false, "let pinned keys be evicted"},
    {N, kClear, kAdmin, kAny, false, "drop everything the node holds"},
    {C, kRegister, kNode, kOwn, false, "a node joins (its own id only)"},
    {C, kHeartbeat, kNode, kOwn, false, "a node's liveness and usage"},
    {C, kEvents, kNode, kOwn, false, "what a node admitted and evicted"},
    {C, kInventory, kNode, kOwn, false, "all a node holds"},
    {C, kDeregister, kNode, kOwn, false, "a node leaves"},
    {C, kLocate, kAdmin | kEngine | kNode, kAny, true, "which nodes hold keys"},
    {C, kAdminNodes, kAnyClient, kAny, false, "the nodes document"},
    {C, kAdminStats, kAnyClient, kAny, false, "the stats document"},
    {C, kAdminHealth, kAnyClient, kAny, false, "the health document"},
    {C, kAdminClear, kAdmin, kAny, false, "clear nodes"},
    {C, kAdminPin, kAdmin, kAny, false, "pin keys on every node"},
    {C, kAdminUnpin, kAdmin, kAny, false, "unpin keys on every node"},
    {C, kAdminEvict, kAdmin, kAny, false, "drop keys from every node"},
    {C, kAdminRevoke, kAdmin, kAny, false, "refuse an engine and drop what it wrote"},
    {C, kAuditMismatch, kEngine, kAny, true, "report keys an audit found wrong"},
};

std::string RoleNames(uint8_t roles) {
  if (roles == kAnyClient) return "any client key";
  std::string out;
  for (auto [bit, name] :
       {std::pair{kAdmin, "admin"}, std::pair{kEngine, "engine"}, std::pair{kNode, "node"}}) {
    if (roles & bit) out += (out.empty() ? "" : ", ") + std::string(name);
  }
  return out;
}

}  // namespace

std::string_view ServerName(Server s) { return s == Server::kNode ? "node" : "controller"; }

std::span<const Permission> Permissions() { return kTable; }

const Permission* PermissionFor(Server server, MsgType type) {
  auto it = std::find_if(std::begin(kTable), std::end(kTable),
                         [&](const Permission& p) { return p.server == server && p.type == type; });
  return it == std::end(kTable) ? nullptr : &*it;
}

Status Authorize(Server server, const CurvePeer* sender, const Header& h) {
  const Permission* p = PermissionFor(server, h.type);
  if (!p) {  // refused, to everyone: unsupported here (a newer peer's type, or another server's)
    return Unsupported(std::string(MsgTypeName(h.type)) + " (" +
                       std::to_string(static_cast<int>(h.type)) + ") is not a " +
                       std::string(ServerName(server)) + " request");
  }
  if (!sender) return Status::Ok();  // the trusted sender
  if (!(p->roles & RoleBit(sender->role))) {
    return PermissionDenied(std::string(MsgTypeName(h.type)) + " needs a key of role " +
                            RoleNames(p->roles));
  }
  if (p->scope == Scope::kOwnNode) {
    const std::string node_id = FieldString(h.fields, "node_id");
    if (sender->node_id != node_id)
      return PermissionDenied("only node " + node_id + "'s key speaks for it");
  }
  return Status::Ok();
}

const std::string* TenantScope(Server server, const CurvePeer* sender, MsgType type) {
  if (!sender || sender->role != Role::kEngine) return nullptr;
  const Permission* p = PermissionFor(server, type);
  return p && p->tenant_scoped ? &sender->tenant : nullptr;
}

std::string PermissionsMarkdown() {
  std::string out =
      "| server | request | allowed for | within the engine's tenant | what it does |\n"
      "|---|---|---|---|---|\n";
  for (const Permission& p : kTable) {
    std::string who = RoleNames(p.roles);
    if (p.scope == Scope::kOwnNode) who = "node N's own key (as node N)";
    out += "| " + std::string(ServerName(p.server)) + " | " + std::string(MsgTypeName(p.type)) +
           " | " + who + " | " + (p.tenant_scoped ? "yes" : "-") + " | " + std::string(p.what) +
           " |\n";
  }
  return out;
}

}  // namespace pikv
