#include "pikv/client/background_stores.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

namespace pikv::client {
namespace {

using namespace std::chrono_literals;

// Stores past the pool's threads and queue run on the caller's thread:
// threads and memory stay bounded, and no store is dropped.
TEST(BackgroundStoresTest, AFullQueueRunsTheStoreOnTheCallersThread) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> started{0}, ran{0};
  std::vector<std::future<Status>> pending;
  {
    BackgroundStores pool;
    // Whatever fails below, the blocked stores are let go before the pool
    // joins them (it is declared after the pool, so it ends first).
    struct ReleaseOnce {
      std::promise<void>& promise;
      bool done = false;
      void operator()() {
        if (!done) promise.set_value();
        done = true;
      }
      ~ReleaseOnce() { (*this)(); }
    } release_all{release};
    for (int i = 0; i < BackgroundStores::kThreads; ++i) {
      pending.push_back(pool.Run([&] {
        started++;
        released.wait();
        ran++;
        return Status::Ok();
      }));
    }
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (started < BackgroundStores::kThreads && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
    ASSERT_EQ(started, BackgroundStores::kThreads) << "the pool's threads did not start";
    for (size_t i = 0; i < BackgroundStores::kMaxQueued; ++i) {
      pending.push_back(pool.Run([&] {
        ran++;
        return Status::Ok();
      }));
    }
    EXPECT_EQ(pool.ran_inline(), 0u);
    const auto caller = std::this_thread::get_id();
    std::future<Status> inline_store = pool.Run([&] {
      EXPECT_EQ(std::this_thread::get_id(), caller);
      return Unavailable("no node");
    });
    ASSERT_EQ(inline_store.wait_for(0s), std::future_status::ready) << "it waited for the pool";
    EXPECT_EQ(inline_store.get().code(), ErrorCode::kUnavailable);
    EXPECT_EQ(pool.ran_inline(), 1u);
    EXPECT_EQ(ran, 0) << "the queued stores wait for the pool";
    release_all();
  }  // the pool's end runs what is queued
  EXPECT_EQ(ran, BackgroundStores::kThreads + static_cast<int>(BackgroundStores::kMaxQueued));
  for (auto& f : pending) EXPECT_TRUE(f.get().ok());
}

TEST(BackgroundStoresTest, AStoreThatThrowsFailsItsFutureNotTheProcess) {
  BackgroundStores pool;
  std::future<Status> f = pool.Run([]() -> Status { throw std::runtime_error("bug"); });
  EXPECT_THROW(static_cast<void>(f.get()), std::runtime_error);
}

}  // namespace
}  // namespace pikv::client
