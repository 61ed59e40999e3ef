#include "pikv/device/model_config.h"

#include <nlohmann/json.hpp>
#include <set>

#include "config_json.h"

namespace pikv::device {

namespace {

using config_json::CountOr;
using nlohmann::json;

// Model types whose rotary pairs are interleaved (x[2i], x[2i+1]).
const std::set<std::string>& InterleavedTypes() {
  static const std::set<std::string> types = {"gptj", "codegen", "deepseek_v2", "deepseek_v3"};
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

// The newer layout (rope_parameters: rope_theta, rope_type and the scaling
// fields together) rewritten into the older one that RopeSpec reads.
void FlattenRopeParameters(json& c) {
  auto it = c.find("rope_parameters");
  if (it == c.end() || !it->is_object() || c.contains("rope_scaling")) return;
  json scaling = *it;
  c.erase("rope_parameters");
  for (const char* key : {"rope_theta", "partial_rotary_factor"}) {
    if (scaling.contains(key)) {
      c[key] = scaling[key];
      scaling.erase(key);
    }
  }
  const std::string type = scaling.value("rope_type", scaling.value("type", std::string()));
  if (!(type == "default" && scaling.size() == 1)) c["rope_scaling"] = scaling;
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
    m.model_type = c.value("model_type", std::string());
    FlattenRopeParameters(c);
    m.geometry.num_layers =
        CountOr(c, "num_hidden_layers", CountOr(c, "n_layer", CountOr(c, "num_layers", 0)));
    if (m.geometry.num_layers == 0) return fail(InvalidArgument("num_hidden_layers is missing"));
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
      m.rope = *spec;
      m.rope.rope_offset = latent;
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
      m.geometry.head_dim = m.rope.head_dim;
    }
  } catch (const std::exception& e) {  // nlohmann's type errors and CountOr's
    return fail(InvalidArgument(e.what()));
  }
  if (options.max_model_len > 0 && m.rope.scaling == RopeScaling::kLongRope)
    m.rope.max_position = options.max_model_len;
  if (Status s = m.rope.Validate(); !s.ok()) return fail(s);
  return m;
}

std::string DescribeModelJson(const ModelSpec& spec) {
  const RopeSpec& r = spec.rope;
  nlohmann::ordered_json j = {{"model_type", spec.model_type},
                              {"kv_format", std::string(KvFormatName(spec.geometry.format))},
                              {"layers", spec.geometry.num_layers},
                              {"kv_heads", spec.geometry.num_kv_heads},
                              {"head_dim", spec.geometry.head_dim},
                              {"latent_dim", spec.geometry.latent_dim},
                              {"dtype", std::string(DTypeName(spec.dtype))},
                              {"kv_bytes_per_token", spec.KvBytesPerToken()},
                              {"rope_style", r.style == RopeStyle::kNeox ? "neox" : "gptj"},
                              {"rotary_dim", r.rotary_dim},
                              {"rope_offset", r.rope_offset},
                              {"rope_theta", r.theta},
                              {"rope_scaling", ScalingName(r.scaling)},
                              {"attention_factor", r.AttentionScale()},
                              {"inv_freq", r.InverseFrequencies()},
                              {"rope_signature", r.Signature()}};
  // Scaling parameters only where the scaling reads them (a default would mislead).
  if (r.scaling != RopeScaling::kNone && r.scaling != RopeScaling::kLongRope)
    j["rope_factor"] = r.factor;
  if (r.scaling == RopeScaling::kLlama3 || r.scaling == RopeScaling::kYarn ||
      r.scaling == RopeScaling::kLongRope)
    j["original_max_position"] = r.original_max_position;
  return j.dump(2);
}

}  // namespace pikv::device
