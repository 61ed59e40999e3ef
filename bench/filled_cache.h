// A paged KV cache in an engine's layout for a client's namespace (vLLM flash
// order, 16-token blocks, slots in order), filled with finite values in any
// dtype: the source and destination of the client benchmarks.
#pragma once

#include <random>
#include <vector>

#include "pikv/client/client.h"
#include "pikv/device/paged_layout.h"

namespace pikv::bench {

struct FilledCache {
  device::PagedLayout layout;
  std::vector<std::vector<uint8_t>> memory;
  std::vector<int64_t> slots;  // slot of position p is p

  FilledCache(const client::ClientOptions& o, uint64_t tokens, uint32_t block_size = 16) {
    layout = device::PagedLayout::Make(device::PagedLayout::Order::kFlash, o.dtype, o.kv_format,
                                       o.num_kv_heads, o.head_dim, block_size,
                                       (tokens + block_size - 1) / block_size);
    std::mt19937 rng(static_cast<uint32_t>(tokens));
    for (uint32_t l = 0; l < o.num_layers; ++l) {
      // The high byte of each 16-bit word stays in bf16's and f16's normal range.
      memory.emplace_back(layout.ElementsPerLayer() * DTypeSize(layout.dtype));
      for (size_t i = 0; i < memory.back().size(); ++i)
        memory.back()[i] = (i % 2) ? uint8_t(0x3c) : uint8_t(rng());
      layout.layers.push_back(memory.back().data());
    }
    for (uint64_t p = 0; p < tokens; ++p) slots.push_back(int64_t(p));
  }
};

}  // namespace pikv::bench
