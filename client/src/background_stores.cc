#include "pikv/client/background_stores.h"

#include "pikv/common/guarded_thread.h"

namespace pikv::client {

BackgroundStores::~BackgroundStores() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

std::future<Status> BackgroundStores::Run(std::function<Status()> store) {
  std::packaged_task<Status()> task(std::move(store));
  std::future<Status> result = task.get_future();
  {
    std::lock_guard lock(mu_);
    if (queue_.size() < kMaxQueued) {
      if (threads_.empty()) {
        for (int i = 0; i < kThreads; ++i) {
          threads_.push_back(GuardedThread("background store", [this] { Work(); }));
        }
      }
      queue_.push_back(std::move(task));
      ready_.notify_one();
      return result;
    }
    ran_inline_++;
  }
  task();  // an exception it throws is the future's, as on a pool thread
  return result;
}

uint64_t BackgroundStores::ran_inline() const {
  std::lock_guard lock(mu_);
  return ran_inline_;
}

void BackgroundStores::Work() {
  std::unique_lock lock(mu_);
  while (true) {
    ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything queued has run
    std::packaged_task<Status()> task = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

}  // namespace pikv::client
