// The owner table full: a new owner is refused and counted, never filed as
// another's (before, the 65,536th owner became "unknown" of the default
// tenant, so a node could hand default-tenant readers anyone's objects).
// Its own binary: the table is process-wide and this test fills it.
#include <gtest/gtest.h>

#include "pikv/proto/owner.h"
#include "pikv/storage/disk_tier.h"
#include "test_support.h"

namespace pikv::storage {
namespace {

TEST(OwnerTableTest, AFullTableRefusesAndCountsAndTheDiskTierAdmitsNothingItCannotOwn) {
  testing::TempDir dir;
  DiskTierOptions o;
  o.path = dir.str() + "/disk";
  o.capacity_bytes = 1 << 30;
  auto disk = DiskTier::Open(o, [](std::span<const TierEvent>) {});
  ASSERT_TRUE(disk.ok()) << disk.status().ToString();
  auto early = testing::MakeObject(1, 4096);  // an unstamped default-tenant object
  ASSERT_TRUE((*disk)->Put(early.key, early.bytes).ok());

  const std::optional<OwnerId> first = InternOwner({"acme", "w0"});
  ASSERT_TRUE(first.has_value());
  EXPECT_NE(*first, kUnknownOwner);
  size_t held = 0;
  for (size_t i = 1; InternOwner({"acme", "w" + std::to_string(i)}); ++i) held = i;
  EXPECT_LE(held, kMaxOwners);
  EXPECT_GE(held, kMaxOwners - 4);  // the few owners interned above, and id 0 (never handed out)
  const uint64_t refused = OwnerTableRefusals();
  EXPECT_GE(refused, 1u);
  EXPECT_FALSE(InternOwner({"", "late"}).has_value());
  EXPECT_EQ(OwnerTableRefusals(), refused + 1);
  EXPECT_EQ(InternOwner({"acme", "w0"}), first) << "owners held keep their ids";
  EXPECT_EQ(FindOwner(*first)->writer, "w0");

  // An object whose owner the table cannot hold is not admitted to disk
  // (its owner would be lost on the index), and counted as a reject.
  auto late = testing::MakeObject(2, 4096);
  std::vector<uint8_t> bytes(late.bytes.data(), late.bytes.data() + late.bytes.size());
  ASSERT_TRUE(StampWriter(bytes, "late-writer").ok());
  const auto rejects = (*disk)->Stats().rejects;
  EXPECT_EQ((*disk)->Put(late.key, SharedBuffer::FromVector(std::move(bytes))).code(),
            ErrorCode::kRejected);
  EXPECT_FALSE((*disk)->Contains(late.key));
  EXPECT_EQ((*disk)->Stats().rejects, rejects + 1);
  // An owner not known is no tenant's.
  const std::string default_tenant;
  EXPECT_FALSE(TenantMaySee(&default_tenant, FindOwner(kUnknownOwner)));
  EXPECT_TRUE(TenantMaySee(nullptr, FindOwner(kUnknownOwner)));
  EXPECT_TRUE((*disk)->Get(early.key).ok());
}

}  // namespace
}  // namespace pikv::storage
