// The small namespace the client's store and zero-copy tests share: bf16,
// 2 layers, 2 KV heads of 64, NeoX RoPE over the whole head.
#pragma once

#include <string>

#include "pikv/client/client.h"

namespace pikv::client {

inline ClientOptions SmallNamespace(const std::string& node, bool zero_copy = true) {
  ClientOptions o;
  o.local_node = node;
  o.model_id = "m";
  o.dtype = DType::kBF16;
  o.num_layers = 2;
  o.num_kv_heads = 2;
  o.head_dim = 64;
  device::RopeSpec rope;
  rope.head_dim = rope.rotary_dim = 64;
  o.rope = rope;
  o.zero_copy = zero_copy;
  return o;
}

}  // namespace pikv::client
