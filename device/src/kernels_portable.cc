#include <cstring>

#include "kernels.h"
#include "pikv/device/rope_math.h"

namespace pikv::device::kernels {

void Rotation::Fill(const std::vector<float>& c, const std::vector<float>& s) {
  cos = c;
  sin = s;
  cos_dup.resize(2 * c.size());
  sin_alt.resize(2 * c.size());
  for (size_t i = 0; i < c.size(); ++i) {
    cos_dup[2 * i] = cos_dup[2 * i + 1] = c[i];
    sin_alt[2 * i] = -s[i];
    sin_alt[2 * i + 1] = s[i];
  }
}

namespace {

template <typename Load, typename Store>
void Rotate(const uint8_t* src, uint8_t* dst, size_t elem, const HeadShape& shape,
            const Rotation& r, Load load, Store store) {
  // Non-rotary dims are copied bit for bit.
  std::memcpy(dst, src, shape.offset * elem);
  const uint32_t end = shape.offset + shape.rotary_dim;
  std::memcpy(dst + end * elem, src + end * elem, (shape.head_dim - end) * elem);
  for (uint32_t i = 0; i < shape.rotary_dim / 2; ++i) {
    uint32_t a, b;
    math::PairIndex(shape.neox, shape.rotary_dim, i, a, b);
    float x = load(src + (shape.offset + a) * elem), y = load(src + (shape.offset + b) * elem);
    math::RotatePair(x, y, r.cos[i], r.sin[i]);
    store(dst + (shape.offset + a) * elem, x);
    store(dst + (shape.offset + b) * elem, y);
  }
}

// bf16 and f16: 16-bit storage, rotated in fp32.
template <float (*ToF32)(uint16_t), uint16_t (*FromF32)(float)>
void Rotate16(const uint8_t* src, uint8_t* dst, const HeadShape& shape, const Rotation& r) {
  Rotate(
      src, dst, 2, shape, r,
      [](const uint8_t* p) {
        uint16_t v;
        std::memcpy(&v, p, 2);
        return ToF32(v);
      },
      [](uint8_t* p, float f) {
        const uint16_t v = FromF32(f);
        std::memcpy(p, &v, 2);
      });
}

}  // namespace

void RotateHeadPortable(DType dtype, const uint8_t* src, uint8_t* dst, const HeadShape& shape,
                        const Rotation& r) {
  switch (dtype) {
    case DType::kF32:
      Rotate(
          src, dst, 4, shape, r,
          [](const uint8_t* p) {
            float f;
            std::memcpy(&f, p, 4);
            return f;
          },
          [](uint8_t* p, float f) { std::memcpy(p, &f, 4); });
      break;
    case DType::kBF16:
      Rotate16<math::Bf16ToF32, math::F32ToBf16>(src, dst, shape, r);
      break;
    case DType::kF16:
      Rotate16<math::F16ToF32, math::F32ToF16>(src, dst, shape, r);
      break;
  }
}

}  // namespace pikv::device::kernels
