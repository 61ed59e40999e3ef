// The CUDA backend of Remap, built only when CMake finds nvcc
// (PIKV_HAVE_CUDA). It runs the same rotation math (rope_math.h) with one
// thread block per (layer, token): half its threads rotate K (a pair, or
// 16 bytes of pairs, per thread) while the other half copies V in 16-byte
// words. Inputs are device pointers: the chunk payload, the slot mapping,
// and the cache layers in `cache.layers`. Placement checks are the host's
// job (PrepareRemap first); this only launches. CI builds it where nvcc
// exists and has no GPU; scripts/gpu-check.sh runs it on a lent one
// (tests/device/remap_cuda_test.cc, bench/remap_cuda_bench.cc).
#pragma once

#include <cstdint>

#include "pikv/device/paged_layout.h"
#include "pikv/device/rope_plan.h"
#include "pikv/proto/chunk_object.h"

namespace pikv::device {

// cos/sin: device arrays [spec][rotation][rotary_dim / 2] over the plan's
// specs (one rotation per spec for a rotated chunk, one per token for a
// pre-RoPE chunk). A NoPE layer's K is copied. `threads` per block: a
// multiple of 64 (0: the default, 128).
Status RemapCudaLaunch(const ChunkHeader& header, const uint8_t* device_payload,
                       const int64_t* device_slots, const float* device_cos,
                       const float* device_sin, const RopePlan& rope,
                       const PagedLayout& device_cache, void* cuda_stream, unsigned threads = 0);

}  // namespace pikv::device
