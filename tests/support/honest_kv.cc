#include "honest_kv.h"

#include <cmath>
#include <cstring>
#include <random>

#include "pikv/device/rope_math.h"

namespace pikv::testing {

namespace {

// The product a * b rounded to fp32 on its own (never fused into an add):
// the product of two floats is exact in double.
float Product(float a, float b) { return static_cast<float>(double{a} * double{b}); }

float Dot(const float* w, const float* h, uint32_t n, HonestKernel kernel) {
  switch (kernel) {
    case HonestKernel::kFmaInOrder: {
      float s = 0;
      for (uint32_t j = 0; j < n; ++j) s = std::fmaf(w[j], h[j], s);
      return s;
    }
    case HonestKernel::kNoFmaReversed: {
      float s = 0;
      for (uint32_t j = n; j-- > 0;) s = s + Product(w[j], h[j]);
      return s;
    }
    case HonestKernel::kDoubleAccumulate:
      break;
  }
  double s = 0;
  for (uint32_t j = 0; j < n; ++j) s += double{w[j]} * h[j];
  return static_cast<float>(s);
}

// (a, b) rotated by (c, s), by the kernel's arithmetic.
void Rotate(float& a, float& b, float c, float s, HonestKernel kernel) {
  const float a0 = a, b0 = b;
  switch (kernel) {
    case HonestKernel::kFmaInOrder:
      a = std::fmaf(a0, c, -Product(b0, s));
      b = std::fmaf(b0, c, Product(a0, s));
      return;
    case HonestKernel::kNoFmaReversed:
      a = Product(a0, c) - Product(b0, s);
      b = Product(a0, s) + Product(b0, c);
      return;
    case HonestKernel::kDoubleAccumulate:
      break;
  }
  a = static_cast<float>(double{a0} * c - double{b0} * s);
  b = static_cast<float>(double{b0} * c + double{a0} * s);
}

}  // namespace

float Element(std::span<const uint8_t> payload, DType dtype, size_t i) {
  if (dtype == DType::kF32) {
    float f;
    std::memcpy(&f, payload.data() + i * 4, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, payload.data() + i * 2, 2);
  return dtype == DType::kBF16 ? device::math::Bf16ToF32(h) : device::math::F16ToF32(h);
}

void SetElement(std::vector<uint8_t>& payload, DType dtype, size_t i, float v) {
  if (dtype == DType::kF32) {
    std::memcpy(payload.data() + i * 4, &v, 4);
    return;
  }
  const uint16_t h = dtype == DType::kBF16 ? device::math::F32ToBf16(v) : device::math::F32ToF16(v);
  std::memcpy(payload.data() + i * 2, &h, 2);
}

const char* KernelName(HonestKernel k) {
  switch (k) {
    case HonestKernel::kFmaInOrder:
      return "fp32 fma";
    case HonestKernel::kNoFmaReversed:
      return "fp32 no-fma reversed";
    case HonestKernel::kDoubleAccumulate:
      break;
  }
  return "double accumulate";
}

std::vector<uint8_t> HonestPayload(const HonestChunk& c, const device::RopePlan& rope, DType dtype,
                                   KForm k_form, int64_t start, HonestKernel kernel) {
  const uint32_t out_dims = c.kv_heads * c.head_dim;
  const size_t block = size_t{c.tokens} * out_dims;
  std::vector<uint8_t> payload(size_t{c.layers} * 2 * block * DTypeSize(dtype));
  std::mt19937_64 rng(c.seed);
  std::normal_distribution<float> normal(0, 1);
  std::uniform_real_distribution<float> unit(0, 1);
  for (uint32_t layer = 0; layer < c.layers; ++layer) {
    // The layer's inputs, the same for every kernel of this seed.
    std::vector<float> h(size_t{c.tokens} * c.hidden), w(size_t{2} * out_dims * c.hidden);
    for (float& x : h) x = normal(rng);
    for (uint32_t o = 0; o < 2 * out_dims; ++o) {
      const float scale = std::pow(10.0f, unit(rng) * 2 - 1.5f) * (unit(rng) < 0.02f ? 8 : 1);
      for (uint32_t j = 0; j < c.hidden; ++j)
        w[size_t{o} * c.hidden + j] = normal(rng) * scale / std::sqrt(float(c.hidden));
    }
    std::vector<float> kv(2 * block);  // [k|v][token][head][dim]
    for (uint32_t plane = 0; plane < 2; ++plane)
      for (uint32_t t = 0; t < c.tokens; ++t)
        for (uint32_t o = 0; o < out_dims; ++o)
          kv[plane * block + size_t{t} * out_dims + o] =
              Dot(&w[(size_t{plane} * out_dims + o) * c.hidden], &h[size_t{t} * c.hidden], c.hidden,
                  kernel);
    const device::RopeSpec* spec = rope.ForLayer(layer);
    if (spec && k_form == KForm::kRotated) {
      const std::vector<double> inv_freq = spec->InverseFrequencies();
      const float magnitude = static_cast<float>(spec->AttentionScale());
      const bool neox = spec->style == RopeStyle::kNeox;
      for (uint32_t t = 0; t < c.tokens; ++t) {
        for (uint32_t i = 0; i < spec->rotary_dim / 2; ++i) {
          const float angle = static_cast<float>(start + t) * static_cast<float>(inv_freq[i]);
          const float cos = std::cos(angle) * magnitude, sin = std::sin(angle) * magnitude;
          uint32_t first = 0, second = 0;
          device::math::PairIndex(neox, spec->rotary_dim, i, first, second);
          for (uint32_t head = 0; head < c.kv_heads; ++head) {
            float* v = &kv[size_t{t} * out_dims + head * c.head_dim + spec->rope_offset];
            Rotate(v[first], v[second], cos, sin, kernel);
          }
        }
      }
    }
    for (size_t i = 0; i < 2 * block; ++i)
      SetElement(payload, dtype, size_t{layer} * 2 * block + i, kv[i]);
  }
  return payload;
}

}  // namespace pikv::testing
