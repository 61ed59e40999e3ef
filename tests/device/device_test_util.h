// Helpers for device tests: direct RoPE encoding with the shared math, chunk
// objects built from float K/V, and paged caches backed by vectors.
#pragma once

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "pikv/device/remap.h"
#include "pikv/device/rope_math.h"

namespace pikv::device::testing {

inline float Decode(DType t, const uint8_t* p) {
  uint16_t v;
  switch (t) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::kBF16:
      std::memcpy(&v, p, 2);
      return math::Bf16ToF32(v);
    case DType::kF16:
      std::memcpy(&v, p, 2);
      return math::F16ToF32(v);
  }
  return 0;
}
inline void Encode(DType t, uint8_t* p, float f) {
  uint16_t v;
  switch (t) {
    case DType::kF32:
      std::memcpy(p, &f, 4);
      return;
    case DType::kBF16:
      v = math::F32ToBf16(f);
      std::memcpy(p, &v, 2);
      return;
    case DType::kF16:
      v = math::F32ToF16(f);
      std::memcpy(p, &v, 2);
      return;
  }
}

// The engine's own RoPE on one head vector at `position`, in fp32.
inline void EncodeHead(const RopeSpec& spec, double position, float* x) {
  auto t = Encoding(spec, position);
  for (uint32_t i = 0; i < spec.rotary_dim / 2; ++i) {
    uint32_t a, b;
    math::PairIndex(spec.style == RopeStyle::kNeox, spec.rotary_dim, i, a, b);
    math::RotatePair(x[spec.rope_offset + a], x[spec.rope_offset + b], t.cos[i], t.sin[i]);
  }
}

// K and V as floats: [layer][token][head][dim].
struct FloatKv {
  uint32_t layers, tokens, heads, dim;
  std::vector<float> k, v;
  float& K(uint32_t l, uint32_t t, uint32_t h, uint32_t d) {
    return k[((size_t(l) * tokens + t) * heads + h) * dim + d];
  }
  float& V(uint32_t l, uint32_t t, uint32_t h, uint32_t d) {
    return v[((size_t(l) * tokens + t) * heads + h) * dim + d];
  }
};

inline FloatKv RandomKv(uint32_t layers, uint32_t tokens, uint32_t heads, uint32_t dim,
                        uint64_t seed) {
  FloatKv kv{layers, tokens, heads, dim, {}, {}};
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  kv.k.resize(size_t(layers) * tokens * heads * dim);
  kv.v.resize(kv.k.size());
  for (auto& x : kv.k) x = n(rng);
  for (auto& x : kv.v) x = n(rng);
  return kv;
}

// A chunk object from pre-RoPE float K/V: K rotated at virtual_start (or kept
// pre-RoPE), stored in `dtype`. MLA (`mla`): one plane, V ignored.
inline std::vector<uint8_t> MakeChunk(FloatKv kv, const RopeSpec& spec, DType dtype, KForm form,
                                      int64_t virtual_start, bool mla = false) {
  ChunkHeader h;
  h.key = ChunkKey{11, 22};
  h.model_id = "m";
  h.geometry = {kv.layers, kv.tokens, kv.heads,
                kv.dim,    dtype,     mla ? KvFormat::kMla : KvFormat::kStandard};
  h.rope_style = spec.style;
  h.rotary_dim = spec.rotary_dim;
  h.rope_offset = spec.rope_offset;
  h.rope_theta = spec.theta;
  h.rope_spec = spec.Signature();
  h.k_form = form;
  h.virtual_start = virtual_start;
  h.tokens.assign(kv.tokens, 7);
  const size_t es = DTypeSize(dtype);
  std::vector<uint8_t> payload(h.geometry.PayloadBytes());
  uint8_t* p = payload.data();
  for (uint32_t l = 0; l < kv.layers; ++l) {
    for (uint32_t plane = 0; plane < (mla ? 1u : 2u); ++plane) {
      for (uint32_t t = 0; t < kv.tokens; ++t) {
        for (uint32_t hd = 0; hd < kv.heads; ++hd) {
          std::vector<float> vec(&(plane ? kv.V(l, t, hd, 0) : kv.K(l, t, hd, 0)),
                                 &(plane ? kv.V(l, t, hd, 0) : kv.K(l, t, hd, 0)) + kv.dim);
          if (plane == 0 && form == KForm::kRotated)
            EncodeHead(spec, double(virtual_start + t), vec.data());
          for (uint32_t d = 0; d < kv.dim; ++d, p += es) Encode(dtype, p, vec[d]);
        }
      }
    }
  }
  return *BuildChunkObject(h, payload);
}

// A paged cache whose layers live in vectors.
struct Cache {
  PagedLayout layout;
  std::vector<std::vector<uint8_t>> memory;
  Cache(PagedLayout::Order order, DType dtype, uint32_t layers, uint32_t heads, uint32_t dim,
        uint32_t block_size, uint64_t blocks, bool mla = false) {
    layout = PagedLayout::Make(order, dtype, mla ? KvFormat::kMla : KvFormat::kStandard, heads, dim,
                               block_size, blocks);
    for (uint32_t l = 0; l < layers; ++l) {
      memory.emplace_back(layout.ElementsPerLayer() * DTypeSize(dtype), 0xAB);
      layout.layers.push_back(memory.back().data());
    }
  }
  float At(uint32_t layer, uint32_t plane, int64_t slot, uint32_t head, uint32_t d) const {
    return Decode(layout.dtype,
                  layout.HeadVector(layer, plane, slot, head) + d * DTypeSize(layout.dtype));
  }
};

// Random distinct slots from a block table of `blocks` blocks.
inline std::vector<int64_t> RandomSlots(uint32_t n, uint32_t block_size, uint64_t blocks,
                                        uint64_t seed) {
  std::vector<int64_t> all(blocks * block_size);
  for (size_t i = 0; i < all.size(); ++i) all[i] = int64_t(i);
  std::mt19937_64 rng(seed);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(n);
  return all;
}

}  // namespace pikv::device::testing
