#include "../../client/src/backoff.h"

#include <gtest/gtest.h>

namespace pikv::client {
namespace {

using namespace std::chrono_literals;

TEST(BackoffTest, EachFailureDoublesTheWaitUpToItsMostAndASuccessClearsIt) {
  Backoff b(1s, 4s);
  const auto t0 = Backoff::Clock::time_point{} + 100s;
  EXPECT_TRUE(b.Due(t0));
  b.Failed(t0);
  EXPECT_FALSE(b.Due(t0 + 999ms));
  EXPECT_TRUE(b.Due(t0 + 1s));
  b.Failed(t0 + 1s);
  EXPECT_EQ(b.wait(), 2s);
  EXPECT_FALSE(b.Due(t0 + 2999ms));
  b.Failed(t0 + 3s);
  b.Failed(t0 + 7s);
  EXPECT_EQ(b.wait(), 4s);  // capped
  EXPECT_FALSE(b.Due(t0 + 10s));
  EXPECT_TRUE(b.Due(t0 + 11s));
  b.Succeeded();
  EXPECT_EQ(b.wait(), 0s);
  EXPECT_TRUE(b.Due(t0));
  b.Failed(t0);
  EXPECT_EQ(b.wait(), 1s);  // from the start again
}

}  // namespace
}  // namespace pikv::client
