#include "pikv/proto/owner.h"

#include <deque>
#include <map>
#include <mutex>

namespace pikv {

namespace {

struct OwnerTable {
  std::mutex mu;
  std::deque<Owner> owners{Owner{}};  // stable addresses; [kUnknownOwner] is never handed out
  std::map<std::pair<std::string, std::string>, OwnerId> ids;
  uint64_t refusals = 0;
};

OwnerTable& Table() {
  static OwnerTable* table = new OwnerTable;  // never destroyed: ids outlive static teardown
  return *table;
}

}  // namespace

bool IsIdentityName(std::string_view name) {
  if (name.empty() || name.size() > kMaxIdentityName) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool IsReservedName(std::string_view name) { return name == "default" || name == kUnknownWriter; }

std::string OwnerWire(const Owner& owner) { return owner.tenant + "/" + owner.writer; }

std::optional<Owner> ParseOwnerWire(std::string_view text) {
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  Owner o{std::string(text.substr(0, slash)), std::string(text.substr(slash + 1))};
  if (!IsTenantName(o.tenant) || !IsIdentityName(o.writer)) return std::nullopt;
  return o;
}

std::optional<OwnerId> InternOwner(const Owner& owner) {
  OwnerTable& t = Table();
  std::lock_guard lock(t.mu);
  if (auto it = t.ids.find({owner.tenant, owner.writer}); it != t.ids.end()) return it->second;
  if (t.owners.size() >= kMaxOwners) {
    t.refusals++;
    return std::nullopt;
  }
  const auto id = static_cast<OwnerId>(t.owners.size());
  t.owners.push_back(owner);
  t.ids.emplace(std::make_pair(owner.tenant, owner.writer), id);
  return id;
}

uint64_t OwnerTableRefusals() {
  OwnerTable& t = Table();
  std::lock_guard lock(t.mu);
  return t.refusals;
}

const Owner* FindOwner(OwnerId id) {
  OwnerTable& t = Table();
  std::lock_guard lock(t.mu);
  return id != kUnknownOwner && id < t.owners.size() ? &t.owners[id] : nullptr;
}

bool TenantMaySee(const std::string* tenant, const Owner* owner) {
  if (!tenant) return true;
  return owner && owner->tenant == *tenant;
}

}  // namespace pikv
