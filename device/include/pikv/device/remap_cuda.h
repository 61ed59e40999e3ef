// The CUDA backend of Remap, built only when CMake finds nvcc
// (PIKV_HAVE_CUDA). It runs the same rotation math (rope_math.h) with one
// thread block per (layer, token) and threads over (head, pair); V rows are
// copied by the same block. Inputs are device pointers: the chunk payload, the
// slot mapping, and the cache layers in `cache.layers`. Placement checks are
// the host's job (call Remap's validation first); this only launches.
// Compiled in CI where nvcc exists; there is no GPU on these machines, so it
// is compiled-only, never tested here.
#pragma once

#include <cstdint>

#include "pikv/device/paged_layout.h"
#include "pikv/device/rope_plan.h"
#include "pikv/proto/chunk_object.h"

namespace pikv::device {

// cos/sin: device arrays [spec][rotation][rotary_dim / 2] over the plan's
// specs (one rotation per spec for a rotated chunk, one per token for a
// pre-RoPE chunk). A NoPE layer's K is copied.
Status RemapCudaLaunch(const ChunkHeader& header, const uint8_t* device_payload,
                       const int64_t* device_slots, const float* device_cos,
                       const float* device_sin, const RopePlan& rope,
                       const PagedLayout& device_cache, void* cuda_stream);

}  // namespace pikv::device
