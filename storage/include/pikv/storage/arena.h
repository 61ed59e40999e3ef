// Arena: one fixed-size shared-memory region (memfd + mmap) and the allocator
// that hands out byte ranges of it.
//
// The region is a memfd so local clients can later map the same bytes.
// RangeAllocator is best-fit over a free list kept both by offset (to
// coalesce neighbours on free) and by size (to find the best fit); ranges are
// 64-byte aligned. It never hands out more than the region holds, which is
// how the CPU tier's capacity is never exceeded.
// ArenaPrefaulter faults an arena's pages in on a thread of its own.
// Thread-safety: RangeAllocator is internally locked; Arena is immutable after
// construction; ArenaPrefaulter's accessors may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "pikv/common/mutex.h"
#include "pikv/common/status.h"

namespace pikv::storage {

class Arena {
 public:
  // The region is reserved, not yet backed: pages are allocated on first
  // touch (or by an ArenaPrefaulter).
  static Result<std::unique_ptr<Arena>> Create(uint64_t bytes);
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

// Why prefault: a page of the arena is allocated and zeroed by the kernel
// on its first touch, and under a hypervisor that backs guest memory lazily
// (as the machines pikv is measured on do) a page the guest has never used
// since boot also costs the host a fault of its own: about 2 s per 512 MiB
// there, against 0.3 s for pages the guest had used and freed before. That
// is why a fresh node stored and pulled 512 MiB chunks at full speed while
// its arena held under ~1 GiB (the memory the machine had freed earlier)
// and 5-6x slower past it. Faulting the whole arena in once at start moves
// that cost off every store and pull; doing it on a thread keeps the node
// ready at once. Populating never changes a page's contents, so it runs
// safely beside writers (the node's and its local clients').
class ArenaPrefaulter {
 public:
  static constexpr uint64_t kStep = 64ull << 20;  // populated per call; the stop check between
  explicit ArenaPrefaulter(const Arena& arena);   // starts the thread
  ~ArenaPrefaulter();                             // stops it where it is and joins
  ArenaPrefaulter(const ArenaPrefaulter&) = delete;
  ArenaPrefaulter& operator=(const ArenaPrefaulter&) = delete;

  uint64_t faulted_bytes() const { return faulted_.load(std::memory_order_relaxed); }

 private:
  void Run(uint8_t* base, uint64_t size);
  std::atomic<uint64_t> faulted_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
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
