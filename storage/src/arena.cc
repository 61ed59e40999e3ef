#include "pikv/storage/arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace pikv::storage {

Result<std::unique_ptr<Arena>> Arena::Create(uint64_t bytes) {
  if (bytes == 0) return InvalidArgument("arena size must be positive");
  int fd = memfd_create("pikv-cpu-tier", MFD_CLOEXEC);
  if (fd < 0) return IoError(std::string("memfd_create: ") + std::strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int err = errno;
    close(fd);
    return IoError(std::string("ftruncate arena: ") + std::strerror(err));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    close(fd);
    return IoError(std::string("mmap arena: ") + std::strerror(err));
  }
  return std::unique_ptr<Arena>(new Arena(static_cast<uint8_t*>(p), bytes, fd));
}

Arena::~Arena() {
  munmap(base_, size_);
  close(fd_);
}

ArenaPrefaulter::ArenaPrefaulter(const Arena& arena)
    : thread_([this, base = arena.base(), size = arena.size()] { Run(base, size); }) {}

ArenaPrefaulter::~ArenaPrefaulter() {
  stop_ = true;
  thread_.join();
}

void ArenaPrefaulter::Run(uint8_t* base, uint64_t size) {
  const long page = sysconf(_SC_PAGESIZE);
  for (uint64_t at = 0; at < size && !stop_; at += kStep) {
    const uint64_t n = std::min(kStep, size - at);
    // Linux 5.14+. Before it, a read of each page allocates it just as well
    // (shared memory has no zero page to map instead), never racing a writer.
    if (madvise(base + at, n, MADV_POPULATE_WRITE) != 0) {
      for (uint64_t p = 0; p < n; p += static_cast<uint64_t>(page)) {
        (void)*reinterpret_cast<volatile const uint8_t*>(base + at + p);
      }
    }
    faulted_.store(at + n, std::memory_order_relaxed);
  }
}

RangeAllocator::RangeAllocator(uint64_t capacity) : capacity_(capacity / kAlign * kAlign) {
  if (capacity_ > 0) InsertFree(0, capacity_);
}

void RangeAllocator::InsertFree(uint64_t offset, uint64_t size) {
  by_offset_.emplace(offset, size);
  by_size_.emplace(size, offset);
}

void RangeAllocator::EraseFree(std::map<uint64_t, uint64_t>::iterator it) {
  auto [lo, hi] = by_size_.equal_range(it->second);
  for (auto s = lo; s != hi; ++s) {
    if (s->second == it->first) {
      by_size_.erase(s);
      break;
    }
  }
  by_offset_.erase(it);
}

std::optional<uint64_t> RangeAllocator::Allocate(uint64_t bytes) {
  const uint64_t need = RoundUp(std::max<uint64_t>(bytes, 1));
  MutexLock lock(mu_);
  auto fit = by_size_.lower_bound(need);
  if (fit == by_size_.end()) return std::nullopt;
  const uint64_t offset = fit->second;
  const uint64_t size = fit->first;
  EraseFree(by_offset_.find(offset));
  if (size > need) InsertFree(offset + need, size - need);
  used_ += need;
  return offset;
}

void RangeAllocator::Free(uint64_t offset, uint64_t bytes) {
  uint64_t size = RoundUp(std::max<uint64_t>(bytes, 1));
  MutexLock lock(mu_);
  used_ -= size;
  auto next = by_offset_.lower_bound(offset);
  if (next != by_offset_.end() && offset + size == next->first) {
    size += next->second;
    EraseFree(next);
  }
  auto prev = by_offset_.lower_bound(offset);
  if (prev != by_offset_.begin()) {
    --prev;
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      size += prev->second;
      EraseFree(prev);
    }
  }
  InsertFree(offset, size);
}

uint64_t RangeAllocator::used() const {
  MutexLock lock(mu_);
  return used_;
}

size_t RangeAllocator::free_ranges() const {
  MutexLock lock(mu_);
  return by_offset_.size();
}

}  // namespace pikv::storage
