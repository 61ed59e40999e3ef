#include "pikv/common/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <utility>

namespace pikv {

namespace {

// Splits "12.5GiB" into 12.5 and "GiB"; false if there is no number.
bool SplitNumber(std::string_view text, double& number, std::string& unit) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0) return false;
  try {
    size_t used = 0;
    number = std::stod(std::string(text.substr(0, i)), &used);
    if (used != i) return false;
  } catch (const std::exception&) {
    return false;
  }
  std::string_view rest = text.substr(i);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  unit.assign(rest);
  return true;
}

}  // namespace

Result<uint64_t> ParseByteSize(std::string_view text) {
  static const std::pair<const char*, double> kUnits[] = {{"", 1},
                                                          {"B", 1},
                                                          {"K", 1024.0},
                                                          {"KiB", 1024.0},
                                                          {"M", 1048576.0},
                                                          {"MiB", 1048576.0},
                                                          {"G", 1073741824.0},
                                                          {"GiB", 1073741824.0},
                                                          {"T", 1099511627776.0},
                                                          {"TiB", 1099511627776.0},
                                                          {"KB", 1e3},
                                                          {"MB", 1e6},
                                                          {"GB", 1e9},
                                                          {"TB", 1e12}};
  double number = 0;
  std::string unit;
  if (!SplitNumber(text, number, unit))
    return InvalidArgument("'" + std::string(text) + "' is not a size");
  for (const auto& [name, factor] : kUnits) {
    if (unit == name) {
      double bytes = std::round(number * factor);
      if (bytes > 1.8e19) return InvalidArgument("size '" + std::string(text) + "' is too large");
      return static_cast<uint64_t>(bytes);
    }
  }
  return InvalidArgument("unknown size unit '" + unit + "' in '" + std::string(text) +
                         "' (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)");
}

Result<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  static const std::pair<const char*, double> kUnits[] = {
      {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
  double number = 0;
  std::string unit;
  if (!SplitNumber(text, number, unit))
    return InvalidArgument("'" + std::string(text) + "' is not a duration");
  if (unit.empty())
    return InvalidArgument("duration '" + std::string(text) + "' needs a unit (ms, s, m, h)");
  for (const auto& [name, factor] : kUnits) {
    if (unit != name) continue;
    const double ms = std::round(number * factor);
    // Found by fuzz_config_yaml: a huge number overflowed the conversion (UB).
    if (ms > 1e15) return InvalidArgument("duration '" + std::string(text) + "' is too long");
    return std::chrono::milliseconds(static_cast<int64_t>(ms));
  }
  return InvalidArgument("unknown duration unit '" + unit + "' (use ms, s, m, h)");
}

std::string FormatBytes(uint64_t bytes) {
  static const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, kNames[u]);
  return buf;
}

std::string ByteSizeSetting(uint64_t bytes) {
  static const char* kNames[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes == 0 || bytes % 1024 != 0) return std::to_string(bytes);
  int u = 0;
  for (bytes /= 1024; u < 3 && bytes % 1024 == 0; bytes /= 1024) ++u;
  return std::to_string(bytes) + kNames[u];
}

std::string DurationSetting(std::chrono::milliseconds duration) {
  const int64_t ms = duration.count();
  if (ms % 1000 != 0) return std::to_string(ms) + "ms";
  return std::to_string(ms / 1000) + "s";
}

}  // namespace pikv
