// RopeSpec: how a model encodes positions with rotary embeddings, and the
// frequencies that follow from it.
//
// Pairs of dimensions rotate by angle p * inv_freq[i]: (x[i], x[i + r/2]) in
// NeoX / rotate-half style, (x[2i], x[2i+1]) in GPT-J / interleaved style;
// only `rotary_dim` (r) dims starting at `rope_offset` rotate (partial rotary;
// MLA's rope part after the latent), the rest are copied.
// Scalings that only reshape inv_freq keep rotations composable, so a key
// encoded at v and re-rotated by d equals the key encoded at v + d: none,
// linear, Llama-3.1, static NTK, YaRN, LongRoPE. YaRN and LongRoPE also scale
// cos/sin by a magnitude factor at encoding (AttentionScale); re-rotation
// must use the pure rotation. Length-dependent (dynamic) NTK breaks
// composition and is refused.
// Thread-safety: immutable value type.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pikv/common/status.h"
#include "pikv/proto/chunk_object.h"
#include "pikv/proto/kv_types.h"

namespace pikv::device {

enum class RopeScaling : uint8_t { kNone, kLinear, kLlama3, kNtk, kYarn, kLongRope };
const char* ScalingName(RopeScaling s);  // none, linear, llama3, ntk, yarn, longrope

struct RopeSpec {
  // What a chunk object can hold (far above any model's: MLA's 576 is the
  // widest known); bounds what a config can make pikv allocate.
  static constexpr uint32_t kMaxHeadDim = ChunkLimits{}.max_head_dim;

  RopeStyle style = RopeStyle::kNeox;
  uint32_t head_dim = 128;
  uint32_t rotary_dim = 128;
  uint32_t rope_offset = 0;
  double theta = 10000.0;
  RopeScaling scaling = RopeScaling::kNone;
  double factor = 1.0;                                  // linear, Llama-3.1, NTK, YaRN
  double low_freq_factor = 1.0;                         // Llama-3.1
  double high_freq_factor = 4.0;                        // Llama-3.1
  uint32_t original_max_position = 8192;                // Llama-3.1, YaRN, LongRoPE
  double beta_fast = 32.0, beta_slow = 1.0;             // YaRN
  double yarn_attention_factor = 0.0;                   // YaRN; 0 = from mscale (below) or factor
  double yarn_mscale = 0.0, yarn_mscale_all_dim = 0.0;  // YaRN (DeepSeek): 0 = absent
  bool yarn_truncate = true;  // YaRN: round the correction range to whole dims (gpt-oss: false)
  std::vector<double> long_factor, short_factor;  // LongRoPE, rotary_dim / 2 each
  uint32_t max_position = 0;                      // LongRoPE: picks long or short factors once
  double longrope_attention_factor = 0.0;  // LongRoPE; from the config (0: from max_position)

  // From a model config's JSON (HF names: rope_theta, rope_scaling{type|rope_type,
  // factor, ...}, partial_rotary_factor or rotary_pct or rotary_dim, head_dim or
  // hidden_size/num_attention_heads (GPT-J: n_embd/n_head), max_position_embeddings,
  // original_max_position_embeddings). A rope_scaling key pikv does not implement
  // is refused by name, never ignored; so are MLA configs (kv_lora_rank), whose
  // rope part pikv cannot place yet. `style` is not in configs: pass it.
  static Result<RopeSpec> FromConfigJson(std::string_view json, RopeStyle style = RopeStyle::kNeox);

  Status Validate() const;
  // Canonical text of everything that changes the KV: part of the chunk key.
  std::string Signature() const;
  // inv_freq[i] for i < rotary_dim / 2, in double.
  std::vector<double> InverseFrequencies() const;
  // Magnitude applied to cos and sin at encoding (1 for most scalings).
  double AttentionScale() const;
};

// cos/sin of the rotation by `delta` positions (pure: no magnitude factor),
// one pair per rotary frequency, computed in double and stored as float.
struct RotationTable {
  std::vector<float> cos, sin;  // rotary_dim / 2 each
};
RotationTable PureRotation(const RopeSpec& spec, double delta);
// The encoding at absolute position p (with the magnitude factor).
RotationTable Encoding(const RopeSpec& spec, double position);

}  // namespace pikv::device
