// Little-endian load/store helpers for pikv's on-disk and on-wire layouts.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace pikv {

template <typename T>
inline T ByteSwapIfBig(T v) {
  if constexpr (std::endian::native == std::endian::big) {
    T out;
    auto* src = reinterpret_cast<const unsigned char*>(&v);
    auto* dst = reinterpret_cast<unsigned char*>(&out);
    for (size_t i = 0; i < sizeof(T); ++i) dst[i] = src[sizeof(T) - 1 - i];
    return out;
  }
  return v;
}

template <typename T>
inline void StoreLE(void* dst, T v) {
  v = ByteSwapIfBig(v);
  std::memcpy(dst, &v, sizeof(T));
}

template <typename T>
inline T LoadLE(const void* src) {
  T v;
  std::memcpy(&v, src, sizeof(T));
  return ByteSwapIfBig(v);
}

inline void StoreLE32(void* dst, uint32_t v) { StoreLE(dst, v); }

}  // namespace pikv
