// Helpers for device tests: direct RoPE encoding with the shared math, chunk
// objects built from float K/V, and paged caches backed by vectors.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "pikv/device/remap.h"
#include "pikv/device/rope_math.h"
#include "pikv/device/rope_plan.h"

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

// A chunk object from pre-RoPE float K/V: K rotated at virtual_start by each
// layer's spec (NoPE layers as they are), or kept pre-RoPE, stored in
// `dtype`. MLA (`mla`): one plane, V ignored.
inline std::vector<uint8_t> MakeChunk(FloatKv kv, const RopePlan& plan, DType dtype, KForm form,
                                      int64_t virtual_start, bool mla = false) {
  ChunkHeader h;
  h.key = ChunkKey{11, 22};
  h.model_id = "m";
  h.geometry = {kv.layers, kv.tokens, kv.heads,
                kv.dim,    dtype,     mla ? KvFormat::kMla : KvFormat::kStandard};
  SetHeaderRope(plan, h);
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
          if (plane == 0 && form == KForm::kRotated && plan.ForLayer(l))
            EncodeHead(*plan.ForLayer(l), double(virtual_start + t), vec.data());
          for (uint32_t d = 0; d < kv.dim; ++d, p += es) Encode(dtype, p, vec[d]);
        }
      }
    }
  }
  auto object = BuildChunkObject(h, payload);
  EXPECT_TRUE(object.ok()) << object.status().ToString();
  return object.ok() ? std::move(*object) : std::vector<uint8_t>{};
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

// One unit in the last place of `x` in `t` (at least the smallest normal's).
inline float Ulp(DType t, float x) {
  const int mantissa = t == DType::kBF16 ? 7 : t == DType::kF16 ? 10 : 23;
  const int min_exp = t == DType::kF16 ? -14 : -126;
  return std::ldexp(1.f, std::max(std::ilogb(std::max(std::fabs(x), 1e-30f)), min_exp) - mantissa);
}

struct RemapCase {
  DType dtype;
  KForm form;
  int64_t virtual_start, actual_start;
  Backend backend;
};

// What CompareRemapWithEncoding saw: elements checked, those off, the first.
struct RemapComparison {
  size_t checked = 0, mismatches = 0;
  std::string first;
  void Off(const std::string& what) {
    if (mismatches++ == 0) first = what;
  }
};

// Remaps a random chunk (K rotated at virtual_start, or pre-RoPE, by `plan`)
// to actual_start and compares every element with what `engine` (normally
// the same plan; another one shows the check bites) says the engine holds:
// (1) the exact rotation, in double, of the bits the object holds: one
// rounding; (2) the engine's own encoding of the original K at the actual
// position: fp32 relative 1e-5, fp16/bf16 2 ulp (the stored K and the
// remapped K are each rounded once). Dims outside the rope part, all of a
// NoPE layer's K, and V are copied bit for bit. MLA: one latent plane per
// token, its rope part at the spec's rope_offset. A uniform plan is checked
// on two layers, a per-layer plan on all of its own.
inline RemapComparison CompareRemapWithEncoding(const RopePlan& plan, const RopePlan& engine,
                                                KvFormat format, const RemapCase& c) {
  RemapComparison out;
  const bool mla = format == KvFormat::kMla;
  const RopeSpec& main = plan.main();
  const uint32_t layers = plan.uniform() ? 2 : plan.num_layers(), tokens = 5, heads = mla ? 1 : 2,
                 dim = main.head_dim, planes = mla ? 1 : 2;
  if (!plan.Validate(layers).ok() || !engine.Validate(layers).ok()) {
    out.Off("invalid plan: " + plan.Validate(layers).ToString());
    return out;
  }
  FloatKv kv = RandomKv(layers, tokens, heads, dim, 99);
  auto object = MakeChunk(kv, plan, c.dtype, c.form, c.virtual_start, mla);
  Cache cache(PagedLayout::Order::kFlash, c.dtype, layers, heads, dim, 4, 4, mla);
  auto slots = RandomSlots(tokens, 4, 4, 5);
  RemapOptions opt;
  opt.backend = c.backend;
  if (Status st = Remap(object, plan, c.actual_start, slots, cache.layout, opt); !st.ok()) {
    out.Off("remap failed: " + st.ToString());
    return out;
  }
  auto header = *ParseChunkHeader(object);
  const uint8_t* stored = ChunkPayload(object, header).data();
  const size_t es = DTypeSize(c.dtype);
  const uint32_t lo = main.rope_offset, hi = main.rope_offset + main.rotary_dim;
  for (uint32_t l = 0; l < layers; ++l) {
    const RopeSpec* spec = engine.ForLayer(l);
    for (uint32_t t = 0; t < tokens; ++t) {
      const std::string at = "layer " + std::to_string(l) + " token " + std::to_string(t);
      // The rotation remap applies to this token, per the chunk's K form.
      RotationTable rot;
      if (spec) {
        rot = c.form == KForm::kRotated
                  ? PureRotation(*spec, double(c.actual_start - c.virtual_start))
                  : Encoding(*spec, double(c.actual_start + t));
      }
      for (uint32_t h = 0; h < heads; ++h) {
        const uint8_t* src = stored + ((size_t(l) * planes * tokens + t) * heads + h) * dim * es;
        std::vector<double> exact(dim);
        for (uint32_t d = 0; d < dim; ++d) exact[d] = Decode(c.dtype, src + d * es);
        std::vector<float> direct(&kv.K(l, t, h, 0), &kv.K(l, t, h, 0) + dim);
        if (spec) {
          for (uint32_t i = 0; i < main.rotary_dim / 2; ++i) {
            uint32_t a, b;
            math::PairIndex(main.style == RopeStyle::kNeox, main.rotary_dim, i, a, b);
            const double x = exact[lo + a], y = exact[lo + b];
            exact[lo + a] = x * rot.cos[i] - y * rot.sin[i];
            exact[lo + b] = y * rot.cos[i] + x * rot.sin[i];
          }
          EncodeHead(*spec, double(c.actual_start + t), direct.data());
        }
        float max_abs = 0;
        for (float x : direct) max_abs = std::max(max_abs, std::fabs(x));
        for (uint32_t d = 0; d < dim; ++d, ++out.checked) {
          const float got = cache.At(l, 0, slots[t], h, d);
          auto off = [&](const char* what) {
            out.Off(what + at + " dim " + std::to_string(d) + ": got " + std::to_string(got) +
                    ", want " + std::to_string(exact[d]));
          };
          if (!spec || d < lo || d >= hi) {
            if (got != Decode(c.dtype, src + d * es)) off("copied ");
            continue;
          }
          if (c.dtype == DType::kF32) {
            if (std::fabs(got - exact[d]) > 1e-6 * std::max(1.f, max_abs) ||
                std::fabs(got - direct[d]) > 1e-5 * std::max(1.f, max_abs)) {
              off("");
            } else if (c.form == KForm::kPreRope && c.backend == Backend::kPortable &&
                       got != direct[d]) {
              off("pre-RoPE must equal the engine's own encoding exactly: ");
            }
          } else if (std::fabs(got - exact[d]) >
                         Ulp(c.dtype, static_cast<float>(exact[d])) + 1e-6 * max_abs ||
                     std::fabs(got - direct[d]) > 2 * Ulp(c.dtype, max_abs)) {
            off("");
          }
        }
        if (mla) continue;
        const uint8_t* v_src =
            stored + ((size_t(l) * 2 * tokens + tokens + t) * heads + h) * dim * es;
        for (uint32_t d = 0; d < dim; ++d, ++out.checked) {  // V is copied bit for bit
          if (cache.At(l, 1, slots[t], h, d) != Decode(c.dtype, v_src + d * es))
            out.Off("V " + at + " dim " + std::to_string(d));
        }
      }
    }
  }
  return out;
}

inline void CheckRemapMatchesEncoding(const RopePlan& plan, KvFormat format, const RemapCase& c) {
  SCOPED_TRACE(std::string(DTypeName(c.dtype)) +
               (c.form == KForm::kRotated ? " rotated" : " pre-rope") +
               " v=" + std::to_string(c.virtual_start) + " a=" + std::to_string(c.actual_start) +
               (c.backend == Backend::kPortable ? " portable" : " avx2"));
  const RemapComparison r = CompareRemapWithEncoding(plan, plan, format, c);
  ASSERT_EQ(r.mismatches, 0u) << r.first;
  ASSERT_GT(r.checked, 0u);
}

}  // namespace pikv::device::testing
