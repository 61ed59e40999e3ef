// Small enums that describe KV data; shared by chunk keys, chunk objects and
// (later) the device remap. Values are stored in chunk headers and hashed into
// key namespaces, so they are numbered explicitly and never renumbered.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace pikv {

enum class DType : uint8_t { kF32 = 1, kF16 = 2, kBF16 = 3 };

// kStandard: per layer, K and V of shape [token][kv_head][head_dim].
// kMla: per layer, one latent row per token ([token][1][head_dim]) whose
// rotary part sits at `rope_offset`; there is no separate V.
enum class KvFormat : uint8_t { kStandard = 1, kMla = 2 };

// How K is stored: rotated by RoPE at virtual positions starting at the
// header's virtual_start, or before RoPE.
enum class KForm : uint8_t { kRotated = 1, kPreRope = 2 };

enum class RopeStyle : uint8_t { kNeox = 1, kGptj = 2 };

enum class AttentionMode : uint8_t { kIsolated = 1, kPrefixed = 2 };

size_t DTypeSize(DType d);
std::string_view DTypeName(DType d);
std::optional<DType> ParseDType(std::string_view name);
std::string_view KvFormatName(KvFormat f);
std::string_view AttentionModeName(AttentionMode m);

}  // namespace pikv
