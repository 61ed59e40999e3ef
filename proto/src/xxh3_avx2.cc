// XXH3 compiled for AVX2 (see xxh3_avx2.h). Includes nothing but xxhash.h in
// its inline form, whose functions are all static to this file.
#define XXH_INLINE_ALL
#include "xxh3_avx2.h"

#include <stdlib.h>
#include <xxhash.h>

namespace pikv::xxh3_avx2 {

struct State {
  XXH3_state_t xxh;
};

uint64_t Hash(const void* data, size_t size) { return XXH3_64bits(data, size); }

State* NewState() {
  void* p = aligned_alloc(64, (sizeof(State) + 63) / 64 * 64);
  if (p == nullptr) return nullptr;
  State* s = static_cast<State*>(p);
  XXH3_INITSTATE(&s->xxh);
  XXH3_64bits_reset(&s->xxh);
  return s;
}

void Update(State* state, const void* data, size_t size) {
  XXH3_64bits_update(&state->xxh, data, size);
}

uint64_t Digest(const State* state) { return XXH3_64bits_digest(&state->xxh); }

void FreeState(State* state) { free(state); }

}  // namespace pikv::xxh3_avx2
