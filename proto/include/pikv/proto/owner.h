// Owner: who an object belongs to — its tenant (the key namespace it was
// written in; "" is the default tenant) and its writer (the engine that
// stored it, stamped by the node that took the put).
//
// Both are identity names: 1..63 of [A-Za-z0-9._-] (the tenant may also be
// empty). They sit in fixed fields of the chunk header (chunk_object.h), so
// a node can stamp the writer in place and any tier can read both from an
// object's first bytes without parsing it.
//
// Tiers keep owners as small interned ids (OwnerId): one per (tenant,
// writer) pair this process has seen, never freed (they are few: one per
// engine that wrote). A full table refuses a new owner (counted), never
// files it under another's id.
//
// TenantMaySee is the one tenant gate: every tier, node request and
// controller answer asks it. An owner not known (kUnknownOwner, a header
// that does not read) matches no tenant.
// Thread-safety: every function is thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pikv {

inline constexpr size_t kMaxIdentityName = 63;
// The writer of an object a node admitted before writers were recorded, or
// whose header names none (never stamped: a node-less test).
inline constexpr std::string_view kUnknownWriter = "unknown";

// 1..63 of [A-Za-z0-9._-].
bool IsIdentityName(std::string_view name);
// A tenant: empty (the default tenant) or an identity name.
inline bool IsTenantName(std::string_view tenant) {
  return tenant.empty() || IsIdentityName(tenant);
}
// How a tenant is shown: "default" for "".
inline std::string TenantLabel(std::string_view tenant) {
  return tenant.empty() ? "default" : std::string(tenant);
}
// Names no engine or tenant may take: "default" (how "" is shown) and
// "unknown" (kUnknownWriter, and how an owner not known is shown).
bool IsReservedName(std::string_view name);

struct Owner {
  std::string tenant;
  std::string writer;
  friend bool operator==(const Owner&, const Owner&) = default;
};

using OwnerId = uint32_t;
// No owner known: a report that named none, an object whose header does
// not read, an owner a full table refused. Not any tenant's.
inline constexpr OwnerId kUnknownOwner = 0;
inline constexpr size_t kMaxOwners = 1u << 16;  // ids 1 .. kMaxOwners - 1

// An owner on the wire (reports to the controller, audit reports):
// "<tenant>/<writer>" ("/<writer>" in the default tenant). Parsing checks
// both names; nullopt for anything else.
std::string OwnerWire(const Owner& owner);
std::optional<Owner> ParseOwnerWire(std::string_view text);

// The owner's id; nullopt once kMaxOwners - 1 owners are held (counted in
// OwnerTableRefusals).
std::optional<OwnerId> InternOwner(const Owner& owner);
uint64_t OwnerTableRefusals();
// The owner an id names; nullptr for kUnknownOwner and ids never handed out.
const Owner* FindOwner(OwnerId id);

// Whether a reader scoped to `tenant` may see an object of `owner`.
// nullptr tenant: an unscoped reader (an admin, a node, the controller),
// who sees everything; nullptr owner: not known, seen by no tenant.
bool TenantMaySee(const std::string* tenant, const Owner* owner);
inline bool TenantMaySee(const std::string* tenant, const std::optional<Owner>& owner) {
  return TenantMaySee(tenant, owner ? &*owner : nullptr);
}

}  // namespace pikv
