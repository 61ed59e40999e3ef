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
  const std::string described = device::DescribeModelJson(*spec);
  const auto j = nlohmann::ordered_json::parse(described);
  if (o.json) {
    std::cout << described << "\n";
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
  std::cout << "rope signature: " << j["rope_signature"].get<std::string>() << "\n";
  return 0;
}

}  // namespace pikv::cli
