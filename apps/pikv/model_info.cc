#include "model_info.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "pikv/common/text_table.h"
#include "pikv/common/units.h"
#include "pikv/device/model_config.h"

namespace pikv::cli {

namespace {

std::string DescribeSpec(const device::RopeSpec& r) {
  std::ostringstream out;
  out.precision(10);
  out << "theta=" << r.theta << " " << device::ScalingName(r.scaling);
  if (r.scaling != device::RopeScaling::kNone && r.scaling != device::RopeScaling::kLongRope)
    out << " x" << r.factor;
  return out.str();
}

// One row per (attention span, RoPE) group of layers, in first-layer order.
void PrintLayerPlan(const device::ModelSpec& spec, std::ostream& out) {
  struct Group {
    device::LayerAttention attention;
    int rope;
    std::vector<uint32_t> layers;
  };
  std::vector<Group> groups;
  for (uint32_t l = 0; l < spec.geometry.num_layers; ++l) {
    const auto a = l < spec.attention.size() ? spec.attention[l] : device::LayerAttention{};
    const int rope = spec.rope.SpecIndex(l);
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const Group& g) { return g.attention == a && g.rope == rope; });
    if (it == groups.end()) it = groups.insert(groups.end(), Group{a, rope, {}});
    it->layers.push_back(l);
  }
  TextTable t({"layers", "count", "attention", "rope"});
  for (const Group& g : groups) {
    std::string span = device::AttentionSpanName(g.attention.span);
    if (g.attention.span != device::AttentionSpan::kFull)
      span += " " + std::to_string(g.attention.window);
    const std::string rope =
        g.rope == device::RopePlan::kNoRope
            ? "none (NoPE)"
            : "#" + std::to_string(g.rope) + " " + DescribeSpec(spec.rope.specs()[g.rope]);
    t.Add({device::FormatLayers(g.layers), std::to_string(g.layers.size()), span, rope});
  }
  t.Print(out);
}

}  // namespace

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
  // The table: one line per scalar of the main spec; the frequencies as their
  // range; then the layers grouped by attention and RoPE, each spec once.
  TextTable t({"", "value"});
  for (const auto& [key, value] : j.items()) {
    if (value.is_array() || value.is_object() || key == "rope_signature") continue;
    t.Add({key, value.is_string() ? value.get<std::string>() : value.dump()});
  }
  t.Add({"inv_freq", j["inv_freq"].front().dump() + " .. " + j["inv_freq"].back().dump()});
  t.Add({"kv per token", FormatBytes(spec->KvBytesPerToken())});
  t.Print(std::cout);
  std::cout << "\n";
  PrintLayerPlan(*spec, std::cout);
  std::cout << "rope signature: " << j["rope_signature"].get<std::string>() << "\n";
  return 0;
}

}  // namespace pikv::cli
