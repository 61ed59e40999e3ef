#include "pikv/proto/owner.h"

#include <deque>
#include <map>
#include <mutex>

namespace pikv {

namespace {

struct OwnerTable {
  std::mutex mu;
  std::deque<Owner> owners{Owner{"", std::string(kUnknownWriter)}};  // stable addresses
  std::map<std::pair<std::string, std::string>, OwnerId> ids{
      {{"", std::string(kUnknownWriter)}, kUnknownOwner}};
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

std::string OwnerWire(const Owner& owner) { return owner.tenant + "/" + owner.writer; }

std::optional<Owner> ParseOwnerWire(std::string_view text) {
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  Owner o{std::string(text.substr(0, slash)), std::string(text.substr(slash + 1))};
  if (!IsTenantName(o.tenant) || !IsIdentityName(o.writer)) return std::nullopt;
  return o;
}

OwnerId InternOwner(const Owner& owner) {
  OwnerTable& t = Table();
  std::lock_guard lock(t.mu);
  auto [it, added] =
      t.ids.try_emplace({owner.tenant, owner.writer}, static_cast<OwnerId>(t.owners.size()));
  if (!added) return it->second;
  if (t.owners.size() >= kMaxOwners) {
    t.ids.erase(it);
    return kUnknownOwner;
  }
  t.owners.push_back(owner);
  return it->second;
}

const Owner& OwnerOf(OwnerId id) {
  OwnerTable& t = Table();
  std::lock_guard lock(t.mu);
  return id < t.owners.size() ? t.owners[id] : t.owners[kUnknownOwner];
}

}  // namespace pikv
