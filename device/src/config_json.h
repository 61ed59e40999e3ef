// Reading a Hugging Face config.json once parsed: counts that are never
// float-cast, and the RoPE spec. Shared by rope.cc (RopeSpec::FromConfigJson)
// and model_config.cc (ReadModelConfig), so a config is parsed once and every
// count is checked the same way. Private to device/: it exposes nlohmann.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "pikv/device/rope.h"

namespace pikv::device::config_json {

// An integer in [0, 2^32), never a float cast (undefined behaviour out of
// range). Throws std::invalid_argument naming it.
uint32_t Count(const nlohmann::json& v, const std::string& name);
// `c[name]` as a count, or `fallback` when absent or null.
uint32_t CountOr(const nlohmann::json& c, const char* name, uint32_t fallback);
double NumberOr(const nlohmann::json& c, const char* name, double fallback);

// The newer layout (rope_parameters: rope_theta, rope_type and the scaling
// fields together) rewritten into the older one that RopeFromConfig reads.
// Per layer type ({"full_attention": {...}, "sliding_attention": {...}}),
// the full-attention layers' block is the main spec's (layer_rules.cc reads
// the other). A null rope_scaling beside it counts as absent; a non-null
// one, or a rope_parameters that is not an object, throws
// std::invalid_argument (callers turn it into a refusal).
void FlattenRopeParameters(nlohmann::json& c);

// The RoPE spec of a config object; never throws (errors are statuses).
Result<RopeSpec> RopeFromConfig(const nlohmann::json& c, RopeStyle style);

}  // namespace pikv::device::config_json
