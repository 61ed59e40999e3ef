// SharedBuffer: a read-only byte range plus whatever keeps it alive.
//
// The owner is type-erased: an arena allocation of the CPU tier, a RocksDB
// value, a hiredis reply, a received ZeroMQ frame. Copying a SharedBuffer
// copies a reference, never the bytes, so a reader holding one keeps the
// bytes valid even after the cache entry is evicted. Thread-safe to copy and
// destroy from any thread (std::shared_ptr semantics); the bytes are immutable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace pikv {

class SharedBuffer {
 public:
  SharedBuffer() = default;
  SharedBuffer(const uint8_t* data, size_t size, std::shared_ptr<const void> owner)
      : data_(data), size_(size), owner_(std::move(owner)) {}

  // Takes ownership of a vector (no copy).
  static SharedBuffer FromVector(std::vector<uint8_t> bytes);
  // Copies `bytes` into a new heap buffer.
  static SharedBuffer Copy(std::span<const uint8_t> bytes);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::span<const uint8_t> span() const { return {data_, size_}; }
  const std::shared_ptr<const void>& owner() const { return owner_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<const void> owner_;
};

}  // namespace pikv
