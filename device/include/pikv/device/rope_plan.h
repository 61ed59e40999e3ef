// RopePlan: which RoPE each layer of a model uses. Most models rotate every
// layer alike (a uniform plan: one spec, any layer count). Some do not:
// Gemma-3's sliding-window layers rotate with their own base, unscaled;
// Llama-4, SmolLM3 and Cohere2 leave some layers without RoPE (NoPE: their K
// is stored and placed unchanged, never rotated).
//
// specs()[0] is the model's own spec (rope_theta and rope_scaling of its
// config); further specs are the per-layer variants. All specs of a plan
// share their shape (pairing style, head_dim, rotary_dim, offset): the
// kernels and the chunk header describe one shape per object.
//
// The signature is the plan's part of the chunk key's namespace. A uniform
// plan's is its spec's (so uniform models keep their keys); a per-layer
// plan's names the layer count, a 128-bit digest of the layer map, and
// every spec's signature.
// Thread-safety: immutable value type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pikv/common/status.h"
#include "pikv/device/rope.h"

namespace pikv::device {

class RopePlan {
 public:
  static constexpr int kNoRope = -1;

  RopePlan() = default;
  // Every layer rotates by `spec`. Implicit on purpose: a spec is a plan.
  RopePlan(RopeSpec spec);  // NOLINT(google-explicit-constructor)

  // layer_spec[l] is an index into `specs` or kNoRope. Specs no layer uses
  // are kept out (except specs[0]); a map that puts specs[0] on every layer
  // gives the uniform plan, so its signature is that spec's.
  static Result<RopePlan> PerLayer(std::vector<RopeSpec> specs, std::vector<int> layer_spec);

  bool uniform() const { return layer_spec_.empty(); }
  // Layers the plan was made for; 0 for a uniform plan (it fits any count).
  uint32_t num_layers() const { return static_cast<uint32_t>(layer_spec_.size()); }
  const std::vector<RopeSpec>& specs() const { return specs_; }
  const RopeSpec& main() const { return specs_.front(); }
  // specs()[SpecIndex(layer)], or kNoRope.
  int SpecIndex(uint32_t layer) const { return uniform() ? 0 : layer_spec_.at(layer); }
  // Null for a NoPE layer.
  const RopeSpec* ForLayer(uint32_t layer) const;

  // Every spec valid and of one shape; a per-layer plan fits `num_layers`.
  Status Validate(uint32_t num_layers) const;
  std::string Signature() const;

 private:
  std::vector<RopeSpec> specs_{RopeSpec{}};
  std::vector<int> layer_spec_;  // empty: uniform
};

// Ascending layer numbers for people: "0-4,6,8-9".
std::string FormatLayers(const std::vector<uint32_t>& layers);

// The chunk header's RoPE fields: the plan's shape and main theta, and its
// signature (the one field a reader compares).
void SetHeaderRope(const RopePlan& plan, ChunkHeader& header);

}  // namespace pikv::device
