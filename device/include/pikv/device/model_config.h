// ReadModelConfig: everything pikv needs from a Hugging Face config.json,
// read as transformers and vLLM read it: the KV geometry (layers, KV heads,
// head dim; for MLA the latent and the rope part after it), the KV dtype, and
// the RoPE spec with the magnitude the engine bakes into cos/sin.
//
// Both layouts: `rope_theta` + `rope_scaling`, and the newer
// `rope_parameters` (theta, type and scaling fields in one object). Pairing
// follows the model type: interleaved (GPT-J style) for gptj, codegen and
// DeepSeek's MLA models, rotate-half (NeoX) otherwise. What pikv cannot
// reproduce exactly is refused with the key that says so (RopeSpec).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "pikv/common/status.h"
#include "pikv/device/rope.h"
#include "pikv/proto/kv_types.h"

namespace pikv::device {

struct KvGeometry {
  KvFormat format = KvFormat::kStandard;
  uint32_t num_layers = 0;
  uint32_t num_kv_heads = 0;  // MLA: 1 (one latent row per token)
  uint32_t head_dim = 0;      // per KV head; MLA: latent + rope part
  uint32_t latent_dim = 0;    // MLA: kv_lora_rank (the rope part starts here)
};

struct ModelSpec {
  std::string model_type;
  KvGeometry geometry;
  DType dtype = DType::kBF16;
  RopeSpec rope;
  // Bytes of KV one token holds over all layers (K and V; MLA: the latent row).
  uint64_t KvBytesPerToken() const;
};

struct ModelConfigOptions {
  // The engine's maximum model length (vLLM's max_model_len), 0 = the
  // config's: it picks LongRoPE's long or short factors, so it is part of
  // the RoPE signature there.
  uint32_t max_model_len = 0;
  std::optional<DType> dtype;  // overrides the config's torch_dtype
};

// `source` names the file in error messages.
Result<ModelSpec> ReadModelConfig(std::string_view json, const ModelConfigOptions& options = {},
                                  const std::string& source = "config.json");

// What pikv derived, as one JSON object (what `pikv model-info --json` prints
// and pikv.model_info returns): geometry, dtype, KV bytes per token, pairing,
// rotary width and offset, theta, scaling (with its factor and original
// length where the scaling reads them), attention factor, every inv_freq and
// the RoPE signature.
std::string DescribeModelJson(const ModelSpec& spec);

}  // namespace pikv::device
