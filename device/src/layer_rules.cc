#include "layer_rules.h"

#include <map>

#include "config_json.h"

namespace pikv::device::config_json {

namespace {

using nlohmann::json;

// The families whose layers differ, by the model types their configs carry
// (the text model's type where the config nests a text_config).
enum class Family { kOther, kGemma2, kGemma3, kCohere2, kLlama4, kSmolLM3 };

Family FamilyOf(const std::string& model_type) {
  static const std::map<std::string, Family> families = {
      {"gemma2", Family::kGemma2},   {"gemma3", Family::kGemma3}, {"gemma3_text", Family::kGemma3},
      {"cohere2", Family::kCohere2}, {"llama4", Family::kLlama4}, {"llama4_text", Family::kLlama4},
      {"smollm3", Family::kSmolLM3}};
  auto it = families.find(model_type);
  return it == families.end() ? Family::kOther : it->second;
}

bool Has(const json& c, const char* key) { return c.contains(key) && !c[key].is_null(); }

Status NotForFamily(const char* key, const std::string& model_type) {
  return Unsupported(std::string(key) + " (model_type '" + model_type +
                     "'): pikv does not know how this family lays out its layers");
}

// Sliding layers by a period: every `period`-th layer (1-based) is global.
std::vector<bool> SlidingByPeriod(uint32_t layers, uint32_t period) {
  std::vector<bool> sliding(layers);
  for (uint32_t i = 0; i < layers; ++i) sliding[i] = (i + 1) % period != 0;
  return sliding;
}

// Each layer's attention span, as the config names it: layer_types, or the
// family's own period (sliding_window_pattern), or one window for all.
Result<std::vector<LayerAttention>> ReadSpans(const json& c, Family family, const std::string& type,
                                              uint32_t n) {
  const uint32_t window = CountOr(c, "sliding_window", 0);
  const uint32_t chunk = CountOr(c, "attention_chunk_size", 0);
  const LayerAttention full, sliding{AttentionSpan::kSliding, window};
  std::vector<LayerAttention> spans(n, full);
  if (Has(c, "layer_types")) {
    const json& types = c["layer_types"];
    if (!types.is_array() || types.size() != n)
      return InvalidArgument("layer_types must list one type per layer (" + std::to_string(n) +
                             ")");
    for (uint32_t i = 0; i < n; ++i) {
      const std::string t = types[i].is_string() ? types[i].get<std::string>() : types[i].dump();
      if (t == "sliding_attention") {
        spans[i] = sliding;
      } else if (t == "chunked_attention") {
        spans[i] = {AttentionSpan::kChunked, chunk};
      } else if (t != "full_attention") {
        return Unsupported("layer_types[" + std::to_string(i) + "] '" + t +
                           "' is not a layer type pikv knows");
      }
      if (spans[i].span != AttentionSpan::kFull && spans[i].window == 0)
        return InvalidArgument("layer_types names a " + t + " layer but its size is not given");
    }
    return spans;
  }
  std::vector<bool> by_period;
  // Cohere's own name for the period's order; the engines know only this one.
  if (Has(c, "order_of_interleaved_layers") &&
      c["order_of_interleaved_layers"] != "local_attn_first")
    return Unsupported("order_of_interleaved_layers " + c["order_of_interleaved_layers"].dump() +
                       ": only local_attn_first (sliding layers first in each period) is known");
  if (family == Family::kGemma3 || family == Family::kCohere2) {
    const uint32_t period = CountOr(c, "sliding_window_pattern", family == Family::kGemma3 ? 6 : 4);
    if (period == 0) return InvalidArgument("sliding_window_pattern must be positive");
    by_period = SlidingByPeriod(n, period);
  } else if (family == Family::kGemma2) {
    by_period = SlidingByPeriod(n, 2);  // even layers (0, 2, ...) slide
  } else if (Has(c, "sliding_window_pattern")) {
    return NotForFamily("sliding_window_pattern", type);
  }
  if (!by_period.empty()) {
    if (window == 0) return InvalidArgument("sliding_window is missing");
    for (uint32_t i = 0; i < n; ++i)
      if (by_period[i]) spans[i] = sliding;
    return spans;
  }
  // One window for every layer (Mistral); a window that covers the whole
  // context is full attention.
  const uint32_t context = CountOr(c, "max_position_embeddings", 0);
  const bool enabled = !c.contains("use_sliding_window") || c["use_sliding_window"] != false;
  if (window > 0 && enabled && (context == 0 || window < context))
    std::fill(spans.begin(), spans.end(), sliding);
  return spans;
}

// Which layers rotate (true) or are NoPE: Llama-4 and SmolLM3 list them in
// no_rope_layers (1 = rotates), or rotate all but every
// no_rope_layer_interval-th; Cohere2 rotates its sliding layers only.
Result<std::vector<bool>> ReadRotating(const json& c, Family family, const std::string& type,
                                       const std::vector<LayerAttention>& spans) {
  const uint32_t n = static_cast<uint32_t>(spans.size());
  const bool nope_family = family == Family::kLlama4 || family == Family::kSmolLM3;
  // Llama-4 reads an empty list as none given (some Scout configs carry []);
  // SmolLM3 keeps it, and then has no entry for any layer.
  const bool listed =
      Has(c, "no_rope_layers") &&
      !(family == Family::kLlama4 && c["no_rope_layers"].is_array() && c["no_rope_layers"].empty());
  if (listed) {
    if (!nope_family) return NotForFamily("no_rope_layers", type);
    const json& list = c["no_rope_layers"];
    if (!list.is_array() || list.size() < n)
      return InvalidArgument("no_rope_layers must have an entry for each of the " +
                             std::to_string(n) + " layers");
    std::vector<bool> rotating(n);
    for (uint32_t i = 0; i < n; ++i) {
      if (!list[i].is_number_integer() || (list[i] != 0 && list[i] != 1))
        return InvalidArgument("no_rope_layers entries must be 0 (NoPE) or 1 (RoPE)");
      rotating[i] = list[i] == 1;
    }
    return rotating;
  }
  if (nope_family) {
    const uint32_t interval = CountOr(c, "no_rope_layer_interval", 4);
    if (interval == 0) return InvalidArgument("no_rope_layer_interval must be positive");
    std::vector<bool> rotating(n);
    for (uint32_t i = 0; i < n; ++i) rotating[i] = (i + 1) % interval != 0;
    return rotating;
  }
  if (Has(c, "no_rope_layer_interval")) return NotForFamily("no_rope_layer_interval", type);
  std::vector<bool> rotating(n, true);
  if (family == Family::kCohere2) {
    for (uint32_t i = 0; i < n; ++i) rotating[i] = spans[i].span == AttentionSpan::kSliding;
  }
  return rotating;
}

// The spec of layers of one attention type when the config gives one RoPE
// block per layer type (rope_parameters: {"full_attention": {...}, ...}).
Result<RopeSpec> SpecOfLayerType(const json& c, const json& block, const RopeSpec& main) {
  if (!block.is_object())
    return InvalidArgument("rope_parameters.sliding_attention is not an object");
  json one = c;
  one.erase("rope_parameters");
  one["rope_parameters"] = block;
  FlattenRopeParameters(one);
  auto spec = RopeFromConfig(one, main.style);
  if (!spec.ok()) return spec.status();
  spec->rope_offset = main.rope_offset;
  spec->max_position = main.max_position;  // LongRoPE: the engine's max_model_len
  return spec;
}

}  // namespace

Status ReadLayerRules(const json& c, ModelSpec& m) {
  try {
    const uint32_t n = m.geometry.num_layers;
    const Family family = FamilyOf(m.model_type);
    auto spans = ReadSpans(c, family, m.model_type, n);
    if (!spans.ok()) return spans.status();
    auto rotating = ReadRotating(c, family, m.model_type, *spans);
    if (!rotating.ok()) return rotating.status();
    if (family == Family::kLlama4) {
      // Llama-4's RoPE layers attend within chunks; its NoPE layers globally.
      const uint32_t chunk = CountOr(c, "attention_chunk_size", 0);
      for (uint32_t i = 0; i < n && chunk > 0; ++i)
        if ((*rotating)[i]) (*spans)[i] = {AttentionSpan::kChunked, chunk};
    }
    m.attention = *spans;

    // specs[0] the main spec (the full-attention layers'); [1] the sliding
    // layers' where they differ.
    std::vector<RopeSpec> specs = {m.rope.main()};
    const json* params = Has(c, "rope_parameters") ? &c["rope_parameters"] : nullptr;
    if (params && params->is_object() && params->contains("sliding_attention")) {
      auto local = SpecOfLayerType(c, (*params)["sliding_attention"], m.rope.main());
      if (!local.ok()) return local.status();
      specs.push_back(*local);
    } else if (family == Family::kGemma3) {
      // Local layers: rope_local_base_freq, never scaled.
      RopeSpec local = m.rope.main();
      local.theta = NumberOr(c, "rope_local_base_freq", 10000.0);
      local.scaling = RopeScaling::kNone;
      local.factor = 1.0;
      specs.push_back(local);
    } else if (Has(c, "rope_local_base_freq")) {
      return NotForFamily("rope_local_base_freq", m.model_type);
    }
    std::vector<int> layer_spec(n, 0);
    for (uint32_t i = 0; i < n; ++i) {
      if (!(*rotating)[i]) {
        layer_spec[i] = RopePlan::kNoRope;
      } else if (specs.size() > 1 && (*spans)[i].span == AttentionSpan::kSliding) {
        layer_spec[i] = 1;
      }
    }
    auto plan = RopePlan::PerLayer(std::move(specs), std::move(layer_spec));
    if (!plan.ok()) return plan.status();
    m.rope = *plan;
  } catch (const std::exception& e) {  // nlohmann's type errors and CountOr's
    return InvalidArgument(e.what());
  }
  return Status::Ok();
}

}  // namespace pikv::device::config_json
