#include "pikv/common/stream_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace pikv {
namespace {

// Every alignment of either end against a 64-byte line, lengths about one
// line and several: exactly the source's bytes land, nothing around them
// changes (the ragged ends are copied apart from the whole lines).
TEST(StreamCopyTest, CopiesExactlyTheBytesAtEveryAlignmentAndLength) {
  constexpr size_t kGuard = 128;
  std::vector<uint8_t> src(8192 + 256);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
  for (size_t dst_offset = 0; dst_offset < 64; ++dst_offset) {
    for (size_t src_offset : {0, 1, 16, 63}) {
      for (size_t n : {0, 1, 15, 63, 64, 65, 127, 128, 129, 1000, 4096 + 17, 8192}) {
        std::vector<uint8_t> dst(kGuard + 64 + n + kGuard, 0xEE);
        // The buffer's own alignment is the allocator's: walk from a line start.
        uint8_t* base = dst.data() + kGuard;
        base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
        uint8_t* to = base + dst_offset;
        StreamCopy(to, src.data() + src_offset, n);
        ASSERT_EQ(std::memcmp(to, src.data() + src_offset, n), 0)
            << "dst+" << dst_offset << " src+" << src_offset << " n=" << n;
        for (uint8_t* p = dst.data(); p < to; ++p) ASSERT_EQ(*p, 0xEE) << "before, n=" << n;
        for (uint8_t* p = to + n; p < dst.data() + dst.size(); ++p)
          ASSERT_EQ(*p, 0xEE) << "after, n=" << n;
      }
    }
  }
}

}  // namespace
}  // namespace pikv
