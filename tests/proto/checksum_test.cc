// Xxh3 (AVX2 where the CPU has it) gives libxxhash's XXH3-64 digests, whole
// and in pieces of any size.
#include "pikv/proto/checksum.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <random>
#include <vector>

namespace pikv {
namespace {

TEST(ChecksumTest, SameDigestsAsLibxxhashWholeAndInPieces) {
  std::mt19937_64 rng(7);
  std::vector<uint8_t> bytes(3 << 20);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  for (size_t size : {size_t{0}, size_t{1}, size_t{16}, size_t{129}, size_t{240}, size_t{241},
                      size_t{1024}, size_t{65537}, bytes.size()}) {
    std::span<const uint8_t> data(bytes.data(), size);
    const uint64_t expected = XXH3_64bits(data.data(), data.size());
    EXPECT_EQ(Xxh3(data), expected) << size;
    Xxh3Stream stream;
    for (size_t off = 0; off < size;) {
      const size_t n = std::min<size_t>(size - off, 1 + rng() % 70000);
      stream.Update(data.subspan(off, n));
      off += n;
    }
    EXPECT_EQ(stream.Digest(), expected) << size;
  }
}

}  // namespace
}  // namespace pikv
