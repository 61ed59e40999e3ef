// Which leadership a node follows: a deposed leader's older epoch is
// ignored; a lower epoch claimed without a break for two leases (etcd's
// history rewound) is followed.
#include "pikv/node/elected_epochs.h"

#include <gtest/gtest.h>

#include "pikv/proto/control_wire.h"

namespace pikv::node {
namespace {

using namespace std::chrono_literals;
using Clock = ElectedEpochs::Clock;

Header Claim(MsgType type, const std::string& epoch, int64_t ttl_ms = 3000) {
  Header h;
  h.type = type;
  StampEpoch({epoch, ttl_ms}, h);
  return h;
}

TEST(ElectedEpochsTest, ADeposedLeadersOlderEpochIsIgnoredAndANewerOneAdopted) {
  ElectedEpochs epochs;
  const auto t = Clock::now();
  EXPECT_TRUE(epochs.Current(Header{}, "a", true, t));  // a lone controller: no epoch to keep
  EXPECT_TRUE(epochs.Current(Claim(MsgType::kRegister, "7"), "a", true, t));
  EXPECT_EQ(epochs.newest(), 7);
  EXPECT_FALSE(epochs.Current(Claim(MsgType::kHeartbeat, "6"), "b", false, t));
  EXPECT_TRUE(epochs.Current(Claim(MsgType::kHeartbeat, "9"), "c", false, t));
  EXPECT_EQ(epochs.newest(), 7) << "only a register reply is adopted";
  EXPECT_TRUE(epochs.Current(Claim(MsgType::kRegister, "9"), "c", true, t));
  EXPECT_EQ(epochs.newest(), 9);
  EXPECT_FALSE(epochs.Current(Claim(MsgType::kRegister, "x9"), "c", true, t));  // not a number
}

TEST(ElectedEpochsTest, ALowerEpochClaimedUnbrokenForTwoLeasesIsFollowed) {
  ElectedEpochs epochs;
  auto t = Clock::now();
  ASSERT_TRUE(epochs.Current(Claim(MsgType::kRegister, "50"), "a", true, t));
  // The rewound leader (epoch 3, lease 3 s) asks every second: followed
  // once it has claimed for 6 s; a heartbeat never counts.
  for (int s = 0; s < 6; ++s, t += 1s) {
    EXPECT_FALSE(epochs.Current(Claim(MsgType::kRegister, "3"), "b", true, t)) << s;
    EXPECT_FALSE(epochs.Current(Claim(MsgType::kHeartbeat, "3"), "b", false, t)) << s;
  }
  EXPECT_TRUE(epochs.Current(Claim(MsgType::kRegister, "3"), "b", true, t));
  EXPECT_EQ(epochs.newest(), 3);
}

TEST(ElectedEpochsTest, ABreakAnotherControllerOrAShortLeaseStartsTheClaimAgain) {
  ElectedEpochs epochs;
  auto t = Clock::now();
  ASSERT_TRUE(epochs.Current(Claim(MsgType::kRegister, "50"), "a", true, t));
  auto claim = [&](const std::string& endpoint, const std::string& epoch, int64_t ttl = 3000) {
    return epochs.Current(Claim(MsgType::kRegister, epoch, ttl), endpoint, true, t);
  };
  // A silence longer than the lease breaks the claim.
  EXPECT_FALSE(claim("b", "3"));
  t += 4s;
  EXPECT_FALSE(claim("b", "3"));
  t += 3s;
  EXPECT_FALSE(claim("b", "3"));
  t += 3s;
  EXPECT_TRUE(claim("b", "3"));  // 6 s unbroken since the break
  ASSERT_TRUE(epochs.Current(Claim(MsgType::kRegister, "60"), "a", true, t));
  // Another endpoint, or another epoch, starts its own claim.
  EXPECT_FALSE(claim("b", "4"));
  t += 2s;
  EXPECT_FALSE(claim("c", "4"));
  t += 2s;
  EXPECT_FALSE(claim("b", "4"));
  // A lease below the least a controller may have: never followed down.
  for (int s = 0; s < 10; ++s, t += 1s) EXPECT_FALSE(claim("d", "5", 1000));
  EXPECT_EQ(epochs.newest(), 60);
}

}  // namespace
}  // namespace pikv::node
