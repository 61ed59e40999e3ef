// The AVX2 build of XXH3 (xxh3_avx2.cc, compiled with -mavx2): called only
// after checking the CPU has AVX2. Plain C types only, so that nothing
// compiled for AVX2 can be shared with (and picked by) other code.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace pikv::xxh3_avx2 {

struct State;
uint64_t Hash(const void* data, size_t size);
State* NewState();  // reset; nullptr when out of memory
void Update(State* state, const void* data, size_t size);
uint64_t Digest(const State* state);
void FreeState(State* state);

}  // namespace pikv::xxh3_avx2
