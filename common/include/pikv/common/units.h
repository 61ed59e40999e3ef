// Human-readable sizes ("64GiB", "512MiB", "4096") and durations ("500ms",
// "2s", "1m"). Binary units (KiB, MiB, GiB, TiB) and their short forms (K, M,
// G, T) are powers of 1024; KB/MB/GB/TB are powers of 1000.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "pikv/common/status.h"

namespace pikv {

Result<uint64_t> ParseByteSize(std::string_view text);
Result<std::chrono::milliseconds> ParseDuration(std::string_view text);
std::string FormatBytes(uint64_t bytes);
// As a setting is written, exact: the largest binary unit that divides it
// ("1GiB", "1536KiB", "0"), and "30s", "2500ms", "0s".
std::string ByteSizeSetting(uint64_t bytes);
std::string DurationSetting(std::chrono::milliseconds duration);

}  // namespace pikv
