#include "model_info.h"

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "pikv/common/text_table.h"
#include "pikv/common/units.h"
#include "pikv/device/model_config.h"

namespace pikv::cli {

int RunModelInfo(const ModelInfoOptions& o) {
  std::ifstream file(o.path);
  if (!file) {
    std::cerr << "pikv: cannot read " << o.path << "\n";
    return 1;
  }
  std::stringstream text;
  text << file.rdbuf();
  device::ModelConfigOptions options;
  options.max_model_len = o.max_model_len;
  if (!o.dtype.empty()) {
    options.dtype = ParseDType(o.dtype);
    if (!options.dtype) {
      std::cerr << "pikv: --dtype '" << o.dtype << "' is not f32, f16 or bf16\n";
      return 2;
    }
  }
  auto spec = device::ReadModelConfig(text.str(), options, o.path);
  if (!spec.ok()) {
    std::cerr << "pikv: refused: " << spec.status().message() << "\n";
    return 1;
  }
  const device::RopeSpec& r = spec->rope;
  const auto inv = r.InverseFrequencies();
  nlohmann::ordered_json j = {{"model_type", spec->model_type},
                              {"kv_format", std::string(KvFormatName(spec->geometry.format))},
                              {"layers", spec->geometry.num_layers},
                              {"kv_heads", spec->geometry.num_kv_heads},
                              {"head_dim", spec->geometry.head_dim},
                              {"latent_dim", spec->geometry.latent_dim},
                              {"dtype", std::string(DTypeName(spec->dtype))},
                              {"kv_bytes_per_token", spec->KvBytesPerToken()},
                              {"rope_style", r.style == RopeStyle::kNeox ? "neox" : "gptj"},
                              {"rotary_dim", r.rotary_dim},
                              {"rope_offset", r.rope_offset},
                              {"rope_theta", r.theta},
                              {"rope_scaling", device::ScalingName(r.scaling)},
                              {"attention_factor", r.AttentionScale()},
                              {"inv_freq", inv},
                              {"rope_signature", r.Signature()}};
  // Scaling parameters only where the scaling reads them (a default would mislead).
  if (r.scaling != device::RopeScaling::kNone && r.scaling != device::RopeScaling::kLongRope)
    j["rope_factor"] = r.factor;
  if (r.scaling == device::RopeScaling::kLlama3 || r.scaling == device::RopeScaling::kYarn ||
      r.scaling == device::RopeScaling::kLongRope)
    j["original_max_position"] = r.original_max_position;
  if (o.json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  // The table: one line per scalar; the frequencies as their range and the
  // signature (long for LongRoPE) under it.
  TextTable t({"", "value"});
  for (const auto& [key, value] : j.items()) {
    if (value.is_array() || key == "rope_signature") continue;
    t.Add({key, value.is_string() ? value.get<std::string>() : value.dump()});
  }
  t.Add({"inv_freq", j["inv_freq"].front().dump() + " .. " + j["inv_freq"].back().dump()});
  t.Add({"kv per token", FormatBytes(spec->KvBytesPerToken())});
  t.Print(std::cout);
  std::cout << "rope signature: " << r.Signature() << "\n";
  return 0;
}

}  // namespace pikv::cli
