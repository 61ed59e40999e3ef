// PagedLayout: an inference engine's paged KV cache, described by strides.
//
// Per layer, one tensor holds K and V for every block; element (plane, block,
// offset, head, d) lives at
//   layers[layer] + plane * stride_plane + block * stride_block
//                 + offset * stride_offset + head * stride_head + d
// in elements of `dtype` (a head vector is contiguous). A token's slot is
// block * block_size + offset; slot -1 means "skip this token". MLA caches
// have one plane (latent + rope part per token, one "head").
// Strides are all the C++ side is told: an engine's layout name is resolved
// to them on its side (python/pikv/layouts.py, the one list of names). Make's
// orders, for C++ engines and tests, are three of those: flash ([2][blocks]
// [block_size][heads][dim]), flash viewed HND ([2][blocks][heads][block_size]
// [dim]) and block_major ([blocks][2][block_size][heads][dim]). The layout
// does not own the memory.
#pragma once

#include <cstdint>
#include <vector>

#include "pikv/common/status.h"
#include "pikv/proto/kv_types.h"

namespace pikv::device {

struct PagedLayout {
  DType dtype = DType::kBF16;
  KvFormat kv_format = KvFormat::kStandard;
  uint32_t num_kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t block_size = 0;
  uint64_t num_blocks = 0;
  int64_t stride_plane = 0, stride_block = 0, stride_offset = 0, stride_head = 0;  // in elements
  std::vector<void*> layers;
  // The layers are this process's memory. False: a device's (CUDA, NPU),
  // which only the device paths write; the CPU remap and gather refuse it.
  bool host = true;

  uint32_t planes() const { return kv_format == KvFormat::kMla ? 1 : 2; }
  uint64_t num_slots() const { return num_blocks * block_size; }
  // Elements one layer's tensor spans.
  uint64_t ElementsPerLayer() const;
  uint8_t* HeadVector(uint32_t layer, uint32_t plane, int64_t slot, uint32_t head) const;
  // Strides must keep distinct (plane, block, offset, head) vectors apart.
  Status Validate() const;

  enum class Order { kFlash, kFlashHnd, kBlockMajor };  // pikv.layouts' names
  // Fills strides for `order`; `layers` still has to be set by the caller.
  static PagedLayout Make(Order order, DType dtype, KvFormat format, uint32_t num_kv_heads,
                          uint32_t head_dim, uint32_t block_size, uint64_t num_blocks);
};

}  // namespace pikv::device
