// Revocation sweeps run once per engine, off the caller's thread (the
// reporter's, whose heartbeats a Redis SCAN would stall): a register reply
// naming revocations already swept starts nothing, and the remote tier is
// swept only where asked.
#include "pikv/node/revocation_sweeper.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

namespace pikv::node {
namespace {

TEST(RevocationSweeperTest, EachEngineIsSweptOnceOffTheCallersThreadAndTheSharedTierWhereAsked) {
  std::mutex mu;
  std::vector<std::pair<std::string, bool>> swept;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> caller_thread{false};
  const auto caller = std::this_thread::get_id();
  RevocationSweeper sweeper([&](const std::string& engine, bool shared) {
    if (std::this_thread::get_id() == caller) caller_thread = true;
    released.wait();  // a slow sweep (a SCAN of Redis)
    std::lock_guard lock(mu);
    swept.emplace_back(engine, shared);
    return true;
  });
  // Requests return at once, though the first sweep is still running.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(sweeper.Request("bad", false));
  EXPECT_FALSE(sweeper.Request("bad", false)) << "already swept: a register reply again";
  EXPECT_TRUE(sweeper.Request("bad", true)) << "the remote tier is new";
  EXPECT_FALSE(sweeper.Request("bad", true));
  EXPECT_FALSE(sweeper.Request("bad", false));
  EXPECT_TRUE(sweeper.Request("worse", true));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  release.set_value();
  sweeper.WaitIdle();
  EXPECT_FALSE(caller_thread);
  std::lock_guard lock(mu);
  EXPECT_EQ(swept, (std::vector<std::pair<std::string, bool>>{
                       {"bad", false}, {"bad", true}, {"worse", true}}));
}

TEST(RevocationSweeperTest, ASweepThatFailsOrThrowsIsDoneAgainWhenAskedAgain) {
  std::atomic<int> runs{0};
  RevocationSweeper sweeper([&](const std::string& engine, bool) {
    runs++;
    if (engine == "throws") throw std::runtime_error("Redis went away");
    return engine != "fails";
  });
  sweeper.Request("throws", true);
  sweeper.Request("fails", true);
  sweeper.Request("next", true);
  sweeper.WaitIdle();
  EXPECT_EQ(runs, 3);
  EXPECT_TRUE(sweeper.Request("throws", true));
  EXPECT_TRUE(sweeper.Request("fails", true));
  EXPECT_FALSE(sweeper.Request("next", true));
  sweeper.WaitIdle();
  EXPECT_EQ(runs, 5);
}

}  // namespace
}  // namespace pikv::node
