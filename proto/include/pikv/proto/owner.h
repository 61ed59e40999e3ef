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
// engine that wrote). Ids beyond kMaxOwners share kUnknownOwner.
// Thread-safety: InternOwner and OwnerOf are thread-safe.
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

struct Owner {
  std::string tenant;
  std::string writer;
  friend bool operator==(const Owner&, const Owner&) = default;
};

using OwnerId = uint32_t;
inline constexpr OwnerId kUnknownOwner = 0;  // tenant "", writer "unknown"
inline constexpr size_t kMaxOwners = 1u << 16;

// An owner on the wire (reports to the controller, audit reports):
// "<tenant>/<writer>" ("/<writer>" in the default tenant). Parsing checks
// both names; nullopt for anything else.
std::string OwnerWire(const Owner& owner);
std::optional<Owner> ParseOwnerWire(std::string_view text);

OwnerId InternOwner(const Owner& owner);
// The owner an id names (kUnknownOwner's for an id never handed out).
const Owner& OwnerOf(OwnerId id);

}  // namespace pikv
