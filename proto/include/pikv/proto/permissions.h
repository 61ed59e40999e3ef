// The requests the node's and the controller's servers answer, one row
// each (the PIKV_REQUEST rows of message_types.def): who may send it, its
// scope, and (at a node) where it is served and which latency it is timed
// in. Default deny. A request type the table does not list for a server is
// refused there as unsupported, whoever sends it; a listed one is allowed
// for its roles (and, for what a node says of itself, only for that node's
// key). The trusted sender (security off, or an ipc peer: no CURVE
// identity) may send anything listed. docs/security.md shows the table as
// PermissionsMarkdown() renders it (a test keeps the two equal).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "pikv/common/status.h"
#include "pikv/proto/message.h"
#include "pikv/proto/peer.h"

namespace pikv {

enum class Server : uint8_t { kNode, kController };
std::string_view ServerName(Server s);  // node, controller

inline constexpr uint8_t RoleBit(Role r) { return static_cast<uint8_t>(1u << unsigned(r)); }

enum class Scope : uint8_t {
  kAny,      // any key of the listed roles
  kOwnNode,  // a node's key, speaking for fields["node_id"] = its own id
};

// Where a node serves a request (node_server.cc). The controller serves
// every request on its one thread (kServe).
enum class Pool : uint8_t {
  kServe,       // on the serve thread: answers from memory
  kServeIfCpu,  // on the serve thread when the CPU tier answers, else a worker
  kWorker,      // on the worker pool: may touch disk or Redis
  kPull,        // on the pull pool, under its own bound: waits on peers
};
// The latency histogram a node times a request in (pikv_node_request_seconds).
enum class Latency : uint8_t { kGet, kPut, kOther };
inline constexpr int kNumLatencies = 3;

struct Permission {
  Server server;
  MsgType type;
  uint8_t roles;  // RoleBit()s
  Scope scope;
  // An engine's request acts within its own tenant (what it reads, writes,
  // locates or reports): TenantScope gives the gate of the part that serves
  // it the tenant.
  bool tenant_scoped;
  std::string_view what;  // for people: what the request does
  Pool pool = Pool::kServe;
  Latency latency = Latency::kOther;
};

std::span<const Permission> Permissions();
// The entry for `type` at `server`; null where the table has none.
const Permission* PermissionFor(Server server, MsgType type);
// An entry's place in Permissions() (for counters kept per request type).
inline size_t RowOf(const Permission& p) { return static_cast<size_t>(&p - Permissions().data()); }
// Ok; Unsupported for a type the table does not list for `server`;
// PermissionDenied for a role (or node) the entry does not allow.
Status Authorize(Server server, const CurvePeer* sender, const Header& h);
// The tenant an allowed request acts within: the sender's own where it is
// an engine's and the table marks the request tenant_scoped; null (every
// tenant) for the trusted sender, admins, nodes, and requests that touch
// no tenant's data. Each server's tenant gate reads it, so the table's flag
// is what scopes a request.
const std::string* TenantScope(Server server, const CurvePeer* sender, MsgType type);
// The table as a Markdown table (docs/security.md).
std::string PermissionsMarkdown();

}  // namespace pikv
