// Arena: one fixed-size shared-memory region (memfd + mmap) and the allocator
// that hands out byte ranges of it.
//
// The region is a memfd so local clients can later map the same bytes.
// RangeAllocator is best-fit over a free list kept both by offset (to
// coalesce neighbours on free) and by size (to find the best fit); ranges are
// 64-byte aligned. It never hands out more than the region holds, which is
// how the CPU tier's capacity is never exceeded.
// Thread-safety: RangeAllocator is internally locked; Arena is immutable after
// construction.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "pikv/common/mutex.h"
#include "pikv/common/status.h"

namespace pikv::storage {

class Arena {
 public:
  // prefault: touch every page now, so no page fault happens on the hot path.
  static Result<std::unique_ptr<Arena>> Create(uint64_t bytes, bool prefault);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  uint8_t* base() const { return base_; }
  uint64_t size() const { return size_; }
  int fd() const { return fd_; }

 private:
  Arena(uint8_t* base, uint64_t size, int fd) : base_(base), size_(size), fd_(fd) {}
  uint8_t* base_;
  uint64_t size_;
  int fd_;
};

class RangeAllocator {
 public:
  static constexpr uint64_t kAlign = 64;
  explicit RangeAllocator(uint64_t capacity);

  // Offset of a free range of at least `bytes` (rounded up to kAlign).
  std::optional<uint64_t> Allocate(uint64_t bytes);
  void Free(uint64_t offset, uint64_t bytes);

  static uint64_t RoundUp(uint64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }
  uint64_t used() const;
  uint64_t capacity() const { return capacity_; }
  size_t free_ranges() const;

 private:
  void InsertFree(uint64_t offset, uint64_t size) PIKV_REQUIRES(mu_);
  void EraseFree(std::map<uint64_t, uint64_t>::iterator it) PIKV_REQUIRES(mu_);

  const uint64_t capacity_;
  mutable Mutex mu_;
  uint64_t used_ PIKV_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, uint64_t> by_offset_ PIKV_GUARDED_BY(mu_);     // offset -> size
  std::multimap<uint64_t, uint64_t> by_size_ PIKV_GUARDED_BY(mu_);  // size -> offset
};

}  // namespace pikv::storage
