#include "pikv/device/model_config.h"

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "config_json.h"
#include "layer_rules.h"
#include "pikv/common/enum_names.h"

namespace pikv::device {

namespace {

using config_json::CountOr;
using nlohmann::json;

// Model types whose rotary pairs are interleaved (x[2i], x[2i+1]).
const std::set<std::string>& InterleavedTypes() {
  static const std::set<std::string> types = {"gptj",   "codegen", "deepseek_v2",
                                              "cohere", "cohere2", "deepseek_v3"};
  return types;
}

Result<DType> ConfigDType(const json& c) {
  for (const char* key : {"torch_dtype", "dtype"}) {
    auto it = c.find(key);
    if (it == c.end() || !it->is_string()) continue;
    const std::string d = it->get<std::string>();
    if (d == "bfloat16") return DType::kBF16;
    if (d == "float16") return DType::kF16;
    if (d == "float32") return DType::kF32;
    return Unsupported(std::string(key) + " '" + d + "' is not a KV dtype pikv stores");
  }
  return InvalidArgument("neither torch_dtype nor dtype is given: pass the KV dtype");
}

// A multimodal config (Gemma-3, Llama-4) nests its language model's in
// text_config; the engines read that one (vLLM's get_text_config), with the
// top level's dtype where the text config gives none.
void TakeTextConfig(json& c) {
  auto it = c.find("text_config");
  if (it == c.end() || !it->is_object()) return;
  json text = *it;
  for (const char* key : {"torch_dtype", "dtype"}) {
    if (!text.contains(key) && c.contains(key)) text[key] = c[key];
  }
  if (!text.contains("model_type") && c.contains("model_type"))
    text["model_type"] = c["model_type"].get<std::string>() + "_text";
  c = std::move(text);
}

// Published configs that leave out what their transformers config class
// defaults: gemma-3-4b's text_config names neither rope_theta (1e6, not
// the usual 1e4) nor head_dim (256, not hidden/heads). The engines fill in
// the class's defaults, so pikv does too (Gemma3TextConfig.__init__).
void FillClassDefaults(json& c) {
  static const std::map<std::string, json> defaults = {{"gemma3_text",
                                                        {{"num_hidden_layers", 26},
                                                         {"num_attention_heads", 8},
                                                         {"num_key_value_heads", 4},
                                                         {"head_dim", 256},
                                                         {"hidden_size", 2304},
                                                         {"max_position_embeddings", 131072},
                                                         {"rope_theta", 1000000.0},
                                                         {"rope_local_base_freq", 10000.0},
                                                         {"sliding_window", 4096},
                                                         {"sliding_window_pattern", 6}}}};
  auto it = defaults.find(c.value("model_type", std::string()));
  if (it == defaults.end()) return;
  // In the newer layout the bases live in rope_parameters.
  const bool nested_rope = c.contains("rope_parameters");
  for (const auto& [key, value] : it->second.items()) {
    if (nested_rope && (key == "rope_theta" || key == "rope_local_base_freq")) continue;
    if (!c.contains(key) || c[key].is_null()) c[key] = value;
  }
}

}  // namespace

uint64_t ModelSpec::KvBytesPerToken() const {
  const uint64_t per_layer = uint64_t{geometry.num_kv_heads} * geometry.head_dim * DTypeSize(dtype);
  return geometry.num_layers * per_layer * (geometry.format == KvFormat::kMla ? 1 : 2);
}

Result<ModelSpec> ReadModelConfig(std::string_view text, const ModelConfigOptions& options,
                                  const std::string& source) {
  auto fail = [&](const Status& s) { return Status(s.code(), source + ": " + s.message()); };
  json c = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (c.is_discarded() || !c.is_object()) return fail(InvalidArgument("not a JSON object"));
  ModelSpec m;
  try {
    TakeTextConfig(c);
    FillClassDefaults(c);
    m.model_type = c.value("model_type", std::string());
    const json as_published = c;  // the layer rules read rope_parameters per layer type
    config_json::FlattenRopeParameters(c);
    m.geometry.num_layers =
        CountOr(c, "num_hidden_layers", CountOr(c, "n_layer", CountOr(c, "num_layers", 0)));
    if (m.geometry.num_layers == 0) return fail(InvalidArgument("num_hidden_layers is missing"));
    // What a chunk object can hold; also bounds the per-layer plan a config
    // can make pikv allocate.
    if (m.geometry.num_layers > ChunkLimits{}.max_layers) {
      return fail(InvalidArgument("num_hidden_layers " + std::to_string(m.geometry.num_layers) +
                                  " is over " + std::to_string(ChunkLimits{}.max_layers)));
    }
    if (options.dtype) {
      m.dtype = *options.dtype;
    } else {
      auto d = ConfigDType(c);
      if (!d.ok()) return fail(d.status());
      m.dtype = *d;
    }
    const RopeStyle style =
        InterleavedTypes().count(m.model_type) ? RopeStyle::kGptj : RopeStyle::kNeox;

    if (c.contains("kv_lora_rank") && !c["kv_lora_rank"].is_null()) {
      // One latent row per token: [kv_lora_rank | qk_rope_head_dim], the rope
      // part rotating after the latent (vLLM's MLA cache).
      const uint32_t latent = CountOr(c, "kv_lora_rank", 0);
      const uint32_t rope_dim = CountOr(c, "qk_rope_head_dim", 0);
      if (latent == 0 || rope_dim == 0)
        return fail(InvalidArgument("MLA needs positive kv_lora_rank and qk_rope_head_dim"));
      for (const char* key : {"kv_lora_rank", "qk_rope_head_dim", "partial_rotary_factor",
                              "rotary_pct", "rotary_dim"}) {
        c.erase(key);
      }
      c["head_dim"] = latent + rope_dim;
      c["rotary_dim"] = rope_dim;
      auto spec = config_json::RopeFromConfig(c, style);
      if (!spec.ok()) return fail(spec.status());
      spec->rope_offset = latent;
      m.rope = *spec;
      m.geometry = {KvFormat::kMla, m.geometry.num_layers, 1, latent + rope_dim, latent};
    } else {
      auto spec = config_json::RopeFromConfig(c, style);
      if (!spec.ok()) return fail(spec.status());
      m.rope = *spec;
      const uint32_t heads = CountOr(c, "num_attention_heads", CountOr(c, "n_head", 0));
      uint32_t kv_heads = CountOr(c, "num_key_value_heads", CountOr(c, "num_kv_heads", 0));
      if (kv_heads == 0 && c.value("multi_query", false)) kv_heads = 1;
      if (kv_heads == 0) kv_heads = heads;
      if (kv_heads == 0) return fail(InvalidArgument("num_key_value_heads is missing"));
      if (heads % kv_heads != 0) {
        return fail(
            InvalidArgument("num_attention_heads is not a multiple of num_key_value_heads"));
      }
      m.geometry.num_kv_heads = kv_heads;
      m.geometry.head_dim = m.rope.main().head_dim;
    }
    if (options.max_model_len > 0 && m.rope.main().scaling == RopeScaling::kLongRope) {
      RopeSpec main = m.rope.main();
      main.max_position = options.max_model_len;
      m.rope = main;
    }
    if (Status s = config_json::ReadLayerRules(as_published, m); !s.ok()) return fail(s);
  } catch (const std::exception& e) {  // nlohmann's type errors and CountOr's
    return fail(InvalidArgument(e.what()));
  }
  if (Status s = m.rope.Validate(m.geometry.num_layers); !s.ok()) return fail(s);
  return m;
}

const char* AttentionSpanName(AttentionSpan s) {
  static constexpr EnumName<AttentionSpan> kNames[] = {{AttentionSpan::kFull, "full"},
                                                       {AttentionSpan::kSliding, "sliding"},
                                                       {AttentionSpan::kChunked, "chunked"}};
  return NameOf(kNames, s);
}

namespace {

nlohmann::ordered_json DescribeRope(const RopeSpec& r) {
  nlohmann::ordered_json j = {{"rope_style", r.style == RopeStyle::kNeox ? "neox" : "gptj"},
                              {"rotary_dim", r.rotary_dim},
                              {"rope_offset", r.rope_offset},
                              {"rope_theta", r.theta},
                              {"rope_scaling", ScalingName(r.scaling)},
                              {"attention_factor", r.AttentionScale()},
                              {"inv_freq", r.InverseFrequencies()}};
  // Scaling parameters only where the scaling reads them (a default would mislead).
  if (r.scaling != RopeScaling::kNone && r.scaling != RopeScaling::kLongRope)
    j["rope_factor"] = r.factor;
  if (r.scaling == RopeScaling::kLlama3 || r.scaling == RopeScaling::kYarn ||
      r.scaling == RopeScaling::kLongRope)
    j["original_max_position"] = r.original_max_position;
  return j;
}

}  // namespace

std::string DescribeModelJson(const ModelSpec& spec) {
  nlohmann::ordered_json j = {{"model_type", spec.model_type},
                              {"kv_format", std::string(KvFormatName(spec.geometry.format))},
                              {"layers", spec.geometry.num_layers},
                              {"kv_heads", spec.geometry.num_kv_heads},
                              {"head_dim", spec.geometry.head_dim},
                              {"latent_dim", spec.geometry.latent_dim},
                              {"dtype", std::string(DTypeName(spec.dtype))},
                              {"kv_bytes_per_token", spec.KvBytesPerToken()}};
  j.update(DescribeRope(spec.rope.main()));
  auto specs = nlohmann::ordered_json::array();
  for (const RopeSpec& r : spec.rope.specs()) {
    auto one = DescribeRope(r);
    one["rope_signature"] = r.Signature();
    specs.push_back(one);
  }
  j["rope_specs"] = specs;
  auto layers = nlohmann::ordered_json::array();
  auto attention = nlohmann::ordered_json::array();
  for (uint32_t l = 0; l < spec.geometry.num_layers; ++l) {
    const int s = spec.rope.SpecIndex(l);
    layers.push_back(s == RopePlan::kNoRope ? nlohmann::ordered_json() : nlohmann::ordered_json(s));
    const LayerAttention a = l < spec.attention.size() ? spec.attention[l] : LayerAttention{};
    attention.push_back({{"span", AttentionSpanName(a.span)}, {"window", a.window}});
  }
  j["rope_layers"] = layers;
  j["attention"] = attention;
  j["rope_signature"] = spec.rope.Signature();
  return j.dump(2);
}

}  // namespace pikv::device
