#include "redis_parts.h"

#include <charconv>
#include <cstdio>

namespace pikv::storage {

namespace {

bool ParseNumber(std::string_view& in, uint64_t& out, int base) {
  if (in.empty() || in.front() != ' ') return false;
  in.remove_prefix(1);
  auto [end, ec] = std::from_chars(in.data(), in.data() + in.size(), out, base);
  if (ec != std::errc() || end == in.data()) return false;
  in.remove_prefix(static_cast<size_t>(end - in.data()));
  return true;
}

}  // namespace

std::string EncodeManifest(const PartsManifest& m) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "%s %016llx %llu %llu %u", kPartsMagic.data(),
                static_cast<unsigned long long>(m.generation),
                static_cast<unsigned long long>(m.size),
                static_cast<unsigned long long>(m.part_bytes), m.parts);
  return buf;
}

std::optional<PartsManifest> ParseManifest(std::string_view value) {
  if (value.size() > kMaxManifestBytes || value.substr(0, kPartsMagic.size()) != kPartsMagic)
    return std::nullopt;
  value.remove_prefix(kPartsMagic.size());
  PartsManifest m;
  uint64_t parts = 0;
  if (!ParseNumber(value, m.generation, 16) || !ParseNumber(value, m.size, 10) ||
      !ParseNumber(value, m.part_bytes, 10) || !ParseNumber(value, parts, 10) || !value.empty())
    return std::nullopt;
  if (m.part_bytes == 0 || m.size == 0 || m.size > kMaxPartedObjectBytes || parts > kMaxParts ||
      parts != (m.size + m.part_bytes - 1) / m.part_bytes)
    return std::nullopt;
  m.parts = static_cast<uint32_t>(parts);
  return m;
}

std::string PartKey(const std::string& key, const PartsManifest& m, uint32_t index) {
  char buf[48];
  std::snprintf(buf, sizeof buf, ":part:%016llx:%u", static_cast<unsigned long long>(m.generation),
                index);
  return key + buf;
}

}  // namespace pikv::storage
