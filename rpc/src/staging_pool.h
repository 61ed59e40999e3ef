// StagingPool: the buffers a NodeClient receives streamed objects into,
// reused. A 512 MiB object received into fresh memory pays ~130 K page
// faults (glibc maps anything that large afresh); a buffer given back is
// taken again by the next object it fits. Keeps at most kKeep buffers and
// kKeepBytes in all; buffers still held when the pool goes are simply freed.
// Thread-safe: a buffer may be released on any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace pikv::rpc {

class StagingPool : public std::enable_shared_from_this<StagingPool> {
 public:
  static constexpr size_t kKeep = 2;
  static constexpr uint64_t kKeepBytes = 1ull << 30;

  static std::shared_ptr<StagingPool> Create() {
    return std::shared_ptr<StagingPool>(new StagingPool());
  }
  // At least `size` writable bytes, back in the pool when the last owner drops them.
  std::shared_ptr<uint8_t> Take(uint64_t size);
  size_t kept() const;

 private:
  struct Block {
    std::unique_ptr<uint8_t[]> bytes;
    uint64_t capacity = 0;
  };
  StagingPool() = default;
  void GiveBack(Block block);

  mutable std::mutex mu_;
  std::vector<Block> free_;  // guarded by mu_
};

}  // namespace pikv::rpc
