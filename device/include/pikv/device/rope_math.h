// The rotation itself, as inline functions shared by every backend: the CPU
// kernels include this file, and so does the CUDA kernel (hence the
// PIKV_HOST_DEVICE qualifier). One pair is (a, b) rotated by (c, s):
//   a' = a c - b s,  b' = b c + a s.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define PIKV_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define PIKV_HOST_DEVICE inline
#endif

namespace pikv::device::math {

PIKV_HOST_DEVICE void RotatePair(float& a, float& b, float c, float s) {
  const float a0 = a, b0 = b;
  a = a0 * c - b0 * s;
  b = b0 * c + a0 * s;
}

// Index of the partner dims of pair i in a head vector (NeoX or GPT-J).
PIKV_HOST_DEVICE void PairIndex(bool neox, uint32_t rotary_dim, uint32_t i, uint32_t& first,
                                uint32_t& second) {
  if (neox) {
    first = i;
    second = i + rotary_dim / 2;
  } else {
    first = 2 * i;
    second = 2 * i + 1;
  }
}

// A float's bits and back (memcpy: std::bit_cast is not there in every
// CUDA toolkit's device code).
PIKV_HOST_DEVICE uint32_t F32Bits(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  return bits;
}
PIKV_HOST_DEVICE float F32FromBits(uint32_t bits) {
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

// bf16 <-> f32 (round to nearest even; NaN stays NaN).
PIKV_HOST_DEVICE float Bf16ToF32(uint16_t v) { return F32FromBits(static_cast<uint32_t>(v) << 16); }
PIKV_HOST_DEVICE uint16_t F32ToBf16(float f) {
  uint32_t bits = F32Bits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// IEEE half <-> f32 (round to nearest even), portable.
PIKV_HOST_DEVICE float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exp = 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        exp--;
      }
      mant &= 0x3ffu;
      bits = sign | ((exp + 112) << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  return F32FromBits(bits);
}
PIKV_HOST_DEVICE uint16_t F32ToF16(float f) {
  const uint32_t bits = F32Bits(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // overflow -> inf
  if (abs < 0x38800000u) {                        // subnormal or zero
    if (abs < 0x33000000u) return sign;           // rounds to zero
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14..24
    uint32_t half = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) half++;
    return sign | static_cast<uint16_t>(half);
  }
  uint32_t half = ((abs >> 13) - (112u << 10));
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) half++;
  return sign | static_cast<uint16_t>(half);
}

}  // namespace pikv::device::math
