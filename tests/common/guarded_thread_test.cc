#include "pikv/common/guarded_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <stdexcept>

namespace pikv {
namespace {

// What escapes a thread's body ends that thread, not the process (a bare
// std::thread would call std::terminate), and the thread's clean-up runs.
TEST(GuardedThreadTest, AnEscapingExceptionEndsTheThreadNotTheProcess) {
  std::atomic<int> cleaned{0};
  std::thread standard = GuardedThread(
      "test", [] { throw std::runtime_error("boom"); }, [&] { cleaned++; });
  standard.join();
  std::thread other = GuardedThread(
      "test", [] { throw 42; }, [&] { cleaned++; });
  other.join();
  EXPECT_EQ(cleaned, 2);
  // Clean-up that throws is contained as well.
  GuardedThread(
      "test", [] { throw 1; }, [] { throw std::logic_error("again"); })
      .join();
}

// A thread the process cannot serve without takes it down, saying which.
TEST(GuardedThreadDeathTest, AnEssentialThreadsFailureAbortsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // (Its log line goes to spdlog's sink, stdout here: the signal is what is checked.)
  EXPECT_EXIT(EssentialThread("test worker", [] { throw std::runtime_error("boom"); }).join(),
              testing::KilledBySignal(SIGABRT), "");
  EssentialThread("test worker", [] {}).join();  // one that returns ends as any thread
}

TEST(GuardedThreadTest, ABodyThatReturnsRunsNoCleanUp) {
  std::atomic<bool> ran{false}, cleaned{false};
  GuardedThread(
      "test", [&] { ran = true; }, [&] { cleaned = true; })
      .join();
  EXPECT_TRUE(ran);
  EXPECT_FALSE(cleaned);
}

}  // namespace
}  // namespace pikv
