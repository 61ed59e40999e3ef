// Per-layer rules of a model config: which layers attend over a window (or
// a chunk) and which RoPE each layer uses, as transformers and vLLM build
// each layer (sources in tests/device/model_configs/SOURCES.md). Private to
// device/: it exposes nlohmann.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "pikv/common/status.h"
#include "pikv/device/model_config.h"

namespace pikv::device::config_json {

// Fills spec.attention and spec.rope (a per-layer plan where the family's
// layers differ) from the text config `c`; spec.rope holds the config's
// main spec and spec.geometry.num_layers is set. A per-layer key the rules
// do not cover for this model type is refused by name. Never throws.
Status ReadLayerRules(const nlohmann::json& c, ModelSpec& spec);

}  // namespace pikv::device::config_json
