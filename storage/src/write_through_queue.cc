#include "pikv/storage/write_through_queue.h"

#include <spdlog/spdlog.h>

namespace pikv::storage {

WriteThroughQueue::WriteThroughQueue(Tier* target, Options options)
    : target_(target), options_(options), worker_([this] { Run(); }) {}

WriteThroughQueue::~WriteThroughQueue() { Shutdown(); }

bool WriteThroughQueue::Offer(const ChunkKey& key, SharedBuffer object) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || jobs_.size() >= options_.max_items ||
        bytes_ + object.size() > options_.max_bytes) {
      stats_.dropped++;
      return false;
    }
    bytes_ += object.size();
    jobs_.push_back({key, std::move(object)});
  }
  work_cv_.notify_one();
  return true;
}

void WriteThroughQueue::Run() {
  std::vector<ChunkKey> keys;
  std::vector<SharedBuffer> objects;
  while (true) {
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping and drained
      keys.clear();
      objects.clear();
      while (!jobs_.empty() && keys.size() < options_.batch) {
        keys.push_back(jobs_.front().key);
        objects.push_back(std::move(jobs_.front().object));
        bytes_ -= objects.back().size();
        jobs_.pop_front();
      }
      in_flight_ = keys.size();
    }
    std::vector<Status> results;
    try {
      results = target_->PutMany(keys, objects);
    } catch (const std::exception& e) {
      // Nothing escapes this thread: the batch counts as failed writes.
      spdlog::error("write-through: {}", e.what());
      results.assign(keys.size(), Status(ErrorCode::kInternal, e.what()));
    }
    objects.clear();  // release handles before reporting idle
    uint64_t ok = 0;
    for (const Status& s : results) ok += s.ok() ? 1 : 0;
    {
      std::lock_guard lock(mu_);
      stats_.written += ok;
      stats_.failed += results.size() - ok;
      in_flight_ = 0;
    }
    idle_cv_.notify_all();
  }
}

void WriteThroughQueue::Drain() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [&] { return jobs_.empty() && in_flight_ == 0; });
}

void WriteThroughQueue::Shutdown() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !worker_.joinable()) return;
    stopping_ = true;
  }
  work_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

WriteThroughQueue::Stats WriteThroughQueue::GetStats() const {
  std::lock_guard lock(mu_);
  Stats s = stats_;
  s.depth = jobs_.size() + in_flight_;
  s.queued_bytes = bytes_;
  return s;
}

}  // namespace pikv::storage
