// Chunk KV as honest engines compute it, for the audit tests and
// bench/audit_catch_bench. A chunk's inputs (per layer: hidden states and
// the K and V projections) are drawn once from a seed; an engine then
// computes K = W_k h and V = W_v h with its own kernel (summation order,
// fused multiply-add or not, fp32 or double accumulation), rotates K at
// positions start.. with angles computed in fp32 as engines do
// (float(p) * inv_freq, cosf/sinf), and rounds each value to the dtype.
// Two engines of different kernels thus disagree the way real ones do:
// by a few roundings, more where a value is a cancellation of large terms.
// Output weights span three orders of magnitude per output dim (with a few
// outlier dims), as real K and V do.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "pikv/device/rope_plan.h"
#include "pikv/proto/kv_types.h"

namespace pikv::testing {

enum class HonestKernel {
  kFmaInOrder,       // fp32, fused multiply-add, first term to last
  kNoFmaReversed,    // fp32, each product rounded then added, last term to first
  kDoubleAccumulate  // double accumulation, one rounding to fp32
};
const char* KernelName(HonestKernel k);

struct HonestChunk {
  uint32_t layers = 2, tokens = 16, kv_heads = 2, head_dim = 64, hidden = 256;
  uint64_t seed = 1;
};

// The payload [layer][k|v][token][head][dim] in `dtype`, K rotated at
// positions start.. under `rope` (kRotated) or left pre-RoPE.
std::vector<uint8_t> HonestPayload(const HonestChunk& chunk, const device::RopePlan& rope,
                                   DType dtype, KForm k_form, int64_t start, HonestKernel kernel);

// Element i of a payload in `dtype`, as float; and set (rounded to dtype).
float Element(std::span<const uint8_t> payload, DType dtype, size_t i);
void SetElement(std::vector<uint8_t>& payload, DType dtype, size_t i, float v);

}  // namespace pikv::testing
