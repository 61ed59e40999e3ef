// Stores an engine hands off without waiting (wait=False) run here: a fixed
// number of threads behind a bounded queue, so an engine that stores faster
// than its node takes the chunks grows neither threads nor memory without
// end. When the queue is full a store runs on the caller's thread instead:
// the engine slows to the node's pace and no store is lost.
// Thread-safety: Run may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "pikv/common/status.h"

namespace pikv::client {

class BackgroundStores {
 public:
  static constexpr int kThreads = 2;
  static constexpr size_t kMaxQueued = 16;

  BackgroundStores() = default;
  ~BackgroundStores();  // runs what is queued, then joins
  BackgroundStores(const BackgroundStores&) = delete;
  BackgroundStores& operator=(const BackgroundStores&) = delete;

  // The store's outcome, once it has run (at once when it ran inline).
  std::future<Status> Run(std::function<Status()> store);

  uint64_t ran_inline() const;  // stores run on the caller's thread: the queue was full

 private:
  void Work();

  mutable std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::packaged_task<Status()>> queue_;
  std::vector<std::thread> threads_;  // started with the first store
  bool stopping_ = false;
  uint64_t ran_inline_ = 0;
};

}  // namespace pikv::client
