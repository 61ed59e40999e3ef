// WriteThroughQueue: copies admitted objects to one lower tier in the
// background, never blocking the caller.
//
// Bounded by item count and by bytes. When full, Offer drops the write and
// counts it: a lower tier missing an object costs a recompute later, a
// blocked hot path costs every request now. Jobs hold SharedBuffers (usually
// CPU-arena handles), so no bytes are copied to enqueue. The worker takes up
// to `batch` jobs at a time so a remote tier can pipeline them.
// Thread-safety: Offer, Drain and Stats are thread-safe. Shutdown drains what
// is queued, then stops the worker.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

#include "pikv/storage/tier.h"

namespace pikv::storage {

class WriteThroughQueue {
 public:
  struct Options {
    size_t max_items = 1024;
    uint64_t max_bytes = 1ull << 30;
    size_t batch = 16;
  };
  struct Stats {
    uint64_t depth = 0;
    uint64_t queued_bytes = 0;
    uint64_t written = 0;
    uint64_t failed = 0;
    uint64_t dropped = 0;
  };

  WriteThroughQueue(Tier* target, Options options);
  ~WriteThroughQueue();  // Shutdown()

  // False (and counted as dropped) when the queue is full or shut down.
  bool Offer(const ChunkKey& key, SharedBuffer object);
  // Blocks until every job offered so far has been applied.
  void Drain();
  void Shutdown();
  Stats GetStats() const;

 private:
  struct Job {
    ChunkKey key;
    SharedBuffer object;
  };
  void Run();

  Tier* const target_;
  const Options options_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_, idle_cv_;
  std::deque<Job> jobs_;   // guarded by mu_
  uint64_t bytes_ = 0;     // guarded by mu_
  size_t in_flight_ = 0;   // guarded by mu_
  bool stopping_ = false;  // guarded by mu_
  Stats stats_;            // guarded by mu_ (depth/bytes computed on read)
  std::thread worker_;
};

}  // namespace pikv::storage
