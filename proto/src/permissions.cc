#include "pikv/proto/permissions.h"

#include <algorithm>
#include <array>

#include "pikv/proto/control_wire.h"

namespace pikv {

namespace {

constexpr uint8_t kAdmin = RoleBit(Role::kAdmin), kEngine = RoleBit(Role::kEngine),
                  kNode = RoleBit(Role::kNode);
// The controller's key is a server's: the ZAP handler never admits it as a client.
constexpr uint8_t kAnyClient = kAdmin | kEngine | kNode;

constexpr Server N = Server::kNode, C = Server::kController;
constexpr Scope kAny = Scope::kAny, kOwn = Scope::kOwnNode;
constexpr Pool kServe = Pool::kServe, kServeIfCpu = Pool::kServeIfCpu, kWorker = Pool::kWorker,
               kPullPool = Pool::kPull;
constexpr Latency kGetLatency = Latency::kGet, kPutLatency = Latency::kPut,
                  kOtherLatency = Latency::kOther;

// Everything either server answers; nothing else is. Controller commands to
// a node (resync, clear, delete, revoke) travel over the node's own
// connection to the controller it dialed under the controller's key, not to
// its server, so they are not here.
constexpr Permission kTable[] = {
#define PIKV_MESSAGE(type, number, name)
#define PIKV_REQUEST(type, number, name, server, roles, scope, tenant_scoped, pool, latency, what) \
  {server, MsgType::type, roles, scope, tenant_scoped, what, pool, latency},
#include "pikv/proto/message_types.def"
#undef PIKV_MESSAGE
#undef PIKV_REQUEST
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

static_assert(std::size(kTable) < 128, "the request table's rows are indexed by an int8_t");
static_assert(std::all_of(std::begin(kTable), std::end(kTable),
                          [](const Permission& p) { return static_cast<size_t>(p.type) < 128; }),
              "PermissionFor looks types up below 128");

}  // namespace

std::string_view ServerName(Server s) { return s == Server::kNode ? "node" : "controller"; }

std::span<const Permission> Permissions() { return kTable; }

const Permission* PermissionFor(Server server, MsgType type) {
  // Asked several times per request on a node's serve thread: a lookup
  // table by (server, type), built once, not a scan.
  constexpr size_t kTypes = 128;
  static const auto kIndex = [] {
    std::array<std::array<int8_t, kTypes>, 2> index;
    for (auto& per_server : index) per_server.fill(-1);
    for (size_t i = 0; i < std::size(kTable); ++i) {
      const auto t = static_cast<size_t>(kTable[i].type);
      if (t < kTypes) index[static_cast<size_t>(kTable[i].server)][t] = static_cast<int8_t>(i);
    }
    return index;
  }();
  const auto t = static_cast<size_t>(type);
  if (t >= kTypes) return nullptr;
  const int8_t i = kIndex[static_cast<size_t>(server)][t];
  return i < 0 ? nullptr : &kTable[i];
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
    const std::string node_id = DecodeNodeIdentity(h).node_id;
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
