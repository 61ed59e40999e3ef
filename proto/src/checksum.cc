#include "pikv/proto/checksum.h"

#include <xxhash.h>

#if PIKV_XXH3_AVX2
#include "xxh3_avx2.h"
#endif

namespace pikv {

namespace {

bool UseAvx2() {
#if PIKV_XXH3_AVX2
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
#else
  return false;
#endif
}

}  // namespace

uint64_t Xxh3(std::span<const uint8_t> bytes) {
#if PIKV_XXH3_AVX2
  if (UseAvx2()) return xxh3_avx2::Hash(bytes.data(), bytes.size());
#endif
  return XXH3_64bits(bytes.data(), bytes.size());
}

struct Xxh3Stream::State {
  XXH3_state_t* portable = nullptr;
#if PIKV_XXH3_AVX2
  xxh3_avx2::State* avx2 = nullptr;
#endif
  ~State() {
    XXH3_freeState(portable);
#if PIKV_XXH3_AVX2
    if (avx2) xxh3_avx2::FreeState(avx2);
#endif
  }
};

Xxh3Stream::Xxh3Stream() : state_(std::make_unique<State>()) {
#if PIKV_XXH3_AVX2
  if (UseAvx2()) state_->avx2 = xxh3_avx2::NewState();
  if (state_->avx2) return;
#endif
  state_->portable = XXH3_createState();
  if (state_->portable) XXH3_64bits_reset(state_->portable);
}

Xxh3Stream::~Xxh3Stream() = default;

void Xxh3Stream::Update(std::span<const uint8_t> bytes) {
#if PIKV_XXH3_AVX2
  if (state_->avx2) return xxh3_avx2::Update(state_->avx2, bytes.data(), bytes.size());
#endif
  if (state_->portable) XXH3_64bits_update(state_->portable, bytes.data(), bytes.size());
}

uint64_t Xxh3Stream::Digest() const {
#if PIKV_XXH3_AVX2
  if (state_->avx2) return xxh3_avx2::Digest(state_->avx2);
#endif
  return state_->portable ? XXH3_64bits_digest(state_->portable) : 0;
}

}  // namespace pikv
