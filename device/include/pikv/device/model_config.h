// ReadModelConfig: everything pikv needs from a Hugging Face config.json,
// read as transformers and vLLM read it: the KV geometry (layers, KV heads,
// head dim; for MLA the latent and the rope part after it), the KV dtype, and
// the RoPE spec with the magnitude the engine bakes into cos/sin.
//
// Both layouts: `rope_theta` + `rope_scaling`, and the newer
// `rope_parameters` (theta, type and scaling fields in one object, or one
// such object per layer type). A multimodal config's `text_config` is read
// as the engines read it. Pairing follows the model type: interleaved (GPT-J
// style) for gptj, codegen, Cohere's and DeepSeek's MLA models, rotate-half
// (NeoX) otherwise. RoPE is a per-layer plan where the family makes it one
// (layer_rules.h: Gemma-3's local base, NoPE layers of Llama-4, SmolLM3 and
// Cohere2). What pikv cannot reproduce exactly is refused with the key that
// says so.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pikv/common/status.h"
#include "pikv/device/rope.h"
#include "pikv/device/rope_plan.h"
#include "pikv/proto/kv_types.h"

namespace pikv::device {

struct KvGeometry {
  KvFormat format = KvFormat::kStandard;
  uint32_t num_layers = 0;
  uint32_t num_kv_heads = 0;  // MLA: 1 (one latent row per token)
  uint32_t head_dim = 0;      // per KV head; MLA: latent + rope part
  uint32_t latent_dim = 0;    // MLA: kv_lora_rank (the rope part starts here)
};

// How far back a layer's queries attend. An engine whose allocator knows
// windows (vLLM's hybrid KV cache manager) keeps only the window of a
// sliding or chunked layer, so a whole chunk cannot be placed there.
enum class AttentionSpan : uint8_t { kFull, kSliding, kChunked };
const char* AttentionSpanName(AttentionSpan s);  // full, sliding, chunked
struct LayerAttention {
  AttentionSpan span = AttentionSpan::kFull;
  uint32_t window = 0;  // sliding: the window; chunked: the chunk size
  bool operator==(const LayerAttention&) const = default;
};

struct ModelSpec {
  std::string model_type;  // the text model's (text_config's where nested)
  KvGeometry geometry;
  DType dtype = DType::kBF16;
  RopePlan rope;
  std::vector<LayerAttention> attention;  // one per layer
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
// length where the scaling reads them), attention factor and every inv_freq
// of the main spec; `rope_specs` (the same for each spec of the plan),
// `rope_layers` (each layer's index into rope_specs, null for NoPE),
// `attention` (each layer's span and window) and the plan's RoPE signature.
std::string DescribeModelJson(const ModelSpec& spec);

}  // namespace pikv::device
