// ReferenceModel: a small fp32 decoder used to prove that reusing remapped
// chunk KV gives the same answer as computing from scratch.
//
// RMSNorm, RoPE per layer (a RopePlan: NoPE layers unrotated), grouped-query attention under an
// arbitrary mask, SwiGLU MLP, seeded random weights, configurable geometry. Forward runs new tokens
// at given positions; their keys are the `past` keys (read from a paged cache by slots, in order)
// followed by the new tokens' own, and mask(query, key) indexes that concatenation. It can hand
// back each layer's K (rotated at the given positions) and V of the new tokens: a chunk's KV.
// Thread-safety: const after construction.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "pikv/device/paged_layout.h"
#include "pikv/device/rope_plan.h"

namespace pikv::engine {

struct ModelConfig {
  uint32_t vocab = 97;
  uint32_t hidden = 64;
  uint32_t layers = 2;
  uint32_t heads = 4;
  uint32_t kv_heads = 2;
  uint32_t head_dim = 16;
  uint32_t intermediate = 96;
  device::RopePlan rope;  // head_dim must match
  uint64_t seed = 1;
};

class ReferenceModel {
 public:
  explicit ReferenceModel(ModelConfig config);

  // One layer's K and V for the new tokens: [token][kv_head][head_dim].
  struct LayerKv {
    std::vector<float> k, v;
  };
  struct Past {
    const device::PagedLayout* cache = nullptr;  // fp32
    std::vector<int64_t> slots;                  // one per past key, in order
  };
  using Mask = std::function<bool(size_t query, size_t key)>;

  // Logits [token][vocab] for the new tokens.
  std::vector<float> Forward(std::span<const int32_t> tokens, std::span<const int64_t> positions,
                             const Past& past, const Mask& mask,
                             std::vector<LayerKv>* kv_out = nullptr) const;
  const ModelConfig& config() const { return config_; }

 private:
  struct Layer {
    std::vector<float> attn_norm, wq, wk, wv, wo, mlp_norm, w_gate, w_up, w_down;
  };
  ModelConfig config_;
  std::vector<float> embed_, final_norm_, lm_head_;
  std::vector<Layer> layers_;
};

}  // namespace pikv::engine
