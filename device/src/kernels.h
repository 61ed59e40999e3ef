// Per-head-vector kernels behind Remap; internal to device/.
#pragma once

#include <cstdint>
#include <vector>

#include "pikv/proto/kv_types.h"

namespace pikv::device::kernels {

// One rotation (per chunk, or per token for pre-RoPE), in the two shapes the
// kernels want: per pair (cos[i], sin[i]) and per lane for interleaved pairs
// (cos_dup = c0 c0 c1 c1 ..., sin_alt = -s0 s0 -s1 s1 ...).
struct Rotation {
  std::vector<float> cos, sin, cos_dup, sin_alt;
  void Fill(const std::vector<float>& c, const std::vector<float>& s);
};

struct HeadShape {
  uint32_t head_dim, rotary_dim, offset;
  bool neox;
};

// Copies one K head vector from src to dst, rotating its rotary dims.
void RotateHeadPortable(DType dtype, const uint8_t* src, uint8_t* dst, const HeadShape& shape,
                        const Rotation& r);
// Same with AVX2/FMA/F16C; false if this shape is not vectorizable (caller falls back).
bool RotateHeadAvx2(DType dtype, const uint8_t* src, uint8_t* dst, const HeadShape& shape,
                    const Rotation& r);
bool CpuHasAvx2();

}  // namespace pikv::device::kernels
