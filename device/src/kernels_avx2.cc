// AVX2 + FMA + F16C kernels, compiled for those targets function by function
// and called only after a run-time check (CpuHasAvx2).
#include <cpuid.h>
#include <immintrin.h>

#include <cstring>

#include "kernels.h"

namespace pikv::device::kernels {

bool CpuHasAvx2() {
  __builtin_cpu_init();
  // clang 14's __builtin_cpu_supports does not know "f16c": ask CPUID leaf 1.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
}

#define PIKV_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace {

PIKV_AVX2 inline __m256 Load(DType t, const uint8_t* p) {
  switch (t) {
    case DType::kF32:
      return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
    case DType::kBF16: {
      __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
    case DType::kF16:
      return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  return _mm256_setzero_ps();
}

PIKV_AVX2 inline void Store(DType t, uint8_t* p, __m256 v) {
  switch (t) {
    case DType::kF32:
      _mm256_storeu_ps(reinterpret_cast<float*>(p), v);
      return;
    case DType::kBF16: {
      // Round to nearest even: add 0x7fff + lsb of the kept half, keep the top 16 bits.
      __m256i bits = _mm256_castps_si256(v);
      __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
      bits = _mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb));
      bits = _mm256_srli_epi32(bits, 16);
      __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(bits, bits), 0b1000);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
      return;
    }
    case DType::kF16:
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                       _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
      return;
  }
}

}  // namespace

PIKV_AVX2 bool RotateHeadAvx2(DType t, const uint8_t* src, uint8_t* dst, const HeadShape& shape,
                              const Rotation& r) {
  const size_t elem = DTypeSize(t);
  const uint32_t half = shape.rotary_dim / 2;
  if (shape.neox ? half % 8 != 0 : shape.rotary_dim % 8 != 0) return false;
  std::memcpy(dst, src, shape.offset * elem);
  const uint32_t end = shape.offset + shape.rotary_dim;
  std::memcpy(dst + end * elem, src + end * elem, (shape.head_dim - end) * elem);
  const uint8_t* s = src + shape.offset * elem;
  uint8_t* d = dst + shape.offset * elem;
  if (shape.neox) {
    for (uint32_t i = 0; i < half; i += 8) {
      const __m256 c = _mm256_loadu_ps(r.cos.data() + i), sn = _mm256_loadu_ps(r.sin.data() + i);
      const __m256 a = Load(t, s + i * elem), b = Load(t, s + (i + half) * elem);
      Store(t, d + i * elem, _mm256_fmsub_ps(a, c, _mm256_mul_ps(b, sn)));
      Store(t, d + (i + half) * elem, _mm256_fmadd_ps(b, c, _mm256_mul_ps(a, sn)));
    }
  } else {
    // Interleaved pairs: out = x * (c0 c0 c1 c1 ..) + swap_pairs(x) * (-s0 s0 -s1 s1 ..).
    for (uint32_t j = 0; j < shape.rotary_dim; j += 8) {
      const __m256 x = Load(t, s + j * elem);
      const __m256 swapped = _mm256_permute_ps(x, 0b10110001);
      Store(t, d + j * elem,
            _mm256_fmadd_ps(x, _mm256_loadu_ps(r.cos_dup.data() + j),
                            _mm256_mul_ps(swapped, _mm256_loadu_ps(r.sin_alt.data() + j))));
    }
  }
  return true;
}

}  // namespace pikv::device::kernels
