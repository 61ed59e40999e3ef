#include "pikv/device/rope_plan.h"

#include <xxhash.h>

#include <cstdio>
#include <sstream>

namespace pikv::device {

namespace {

bool SameShape(const RopeSpec& a, const RopeSpec& b) {
  return a.style == b.style && a.head_dim == b.head_dim && a.rotary_dim == b.rotary_dim &&
         a.rope_offset == b.rope_offset;
}

}  // namespace

RopePlan::RopePlan(RopeSpec spec) : specs_{std::move(spec)} {}

Result<RopePlan> RopePlan::PerLayer(std::vector<RopeSpec> specs, std::vector<int> layer_spec) {
  if (specs.empty()) return InvalidArgument("a RoPE plan needs at least one spec");
  if (layer_spec.empty()) return InvalidArgument("a per-layer RoPE plan needs its layers");
  // Specs are kept in first-use order after specs[0]; equal signatures merge.
  RopePlan plan(specs.front());
  std::vector<int> remapped(specs.size(), kNoRope);
  remapped[0] = 0;
  for (int& s : layer_spec) {
    if (s == kNoRope) continue;
    if (s < 0 || static_cast<size_t>(s) >= specs.size())
      return InvalidArgument("RoPE plan names spec " + std::to_string(s) + " of " +
                             std::to_string(specs.size()));
    if (remapped[s] == kNoRope) {
      const std::string sig = specs[s].Signature();
      for (size_t k = 0; k < plan.specs_.size() && remapped[s] == kNoRope; ++k)
        if (plan.specs_[k].Signature() == sig) remapped[s] = static_cast<int>(k);
      if (remapped[s] == kNoRope) {
        remapped[s] = static_cast<int>(plan.specs_.size());
        plan.specs_.push_back(specs[s]);
      }
    }
    s = remapped[s];
  }
  bool all_main = true;
  for (int s : layer_spec) all_main = all_main && s == 0;
  if (!all_main) plan.layer_spec_ = std::move(layer_spec);
  return plan;
}

const RopeSpec* RopePlan::ForLayer(uint32_t layer) const {
  const int s = SpecIndex(layer);
  return s == kNoRope ? nullptr : &specs_[s];
}

Status RopePlan::Validate(uint32_t num_layers) const {
  for (const RopeSpec& s : specs_) {
    if (Status st = s.Validate(); !st.ok()) return st;
    if (!SameShape(s, main()))
      return InvalidArgument(
          "the layers of a RoPE plan must share pairing, head_dim, rotary_dim and offset");
  }
  if (!uniform() && layer_spec_.size() != num_layers) {
    return InvalidArgument("RoPE plan covers " + std::to_string(layer_spec_.size()) +
                           " layers, the KV has " + std::to_string(num_layers));
  }
  return Status::Ok();
}

std::string RopePlan::Signature() const {
  if (uniform()) return main().Signature();
  // The map as text (spec index per layer, '-' for NoPE), digested so that
  // a plan of a thousand layers still fits a chunk header.
  std::string map;
  for (int s : layer_spec_) map += (s == kNoRope ? std::string("-") : std::to_string(s)) + ",";
  const XXH128_hash_t digest = XXH3_128bits(map.data(), map.size());
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(digest.high64),
                static_cast<unsigned long long>(digest.low64));
  std::ostringstream out;
  out << "layers=" << layer_spec_.size() << ";map=" << hex;
  for (size_t k = 0; k < specs_.size(); ++k)
    out << ";rope" << k << "={" << specs_[k].Signature() << "}";
  return out.str();
}

std::string FormatLayers(const std::vector<uint32_t>& layers) {
  std::string out;
  for (size_t i = 0; i < layers.size();) {
    size_t end = i;
    while (end + 1 < layers.size() && layers[end + 1] == layers[end] + 1) ++end;
    if (!out.empty()) out += ",";
    out += std::to_string(layers[i]);
    if (end > i) out += "-" + std::to_string(layers[end]);
    i = end + 1;
  }
  return out;
}

void SetHeaderRope(const RopePlan& plan, ChunkHeader& h) {
  h.rope_style = plan.main().style;
  h.rotary_dim = plan.main().rotary_dim;
  h.rope_offset = plan.main().rope_offset;
  h.rope_theta = plan.main().theta;
  h.rope_spec = plan.Signature();
}

}  // namespace pikv::device
