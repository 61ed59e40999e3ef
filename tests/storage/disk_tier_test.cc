#include "pikv/storage/disk_tier.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <filesystem>
#include <fstream>

#include "test_support.h"

namespace pikv::storage {
namespace {

using testing::MakeObject;
using testing::TestObject;

class DiskTierTest : public ::testing::Test {
 protected:
  void Open(uint64_t capacity = 1 << 30) {
    tier_.reset();
    DiskTierOptions o;
    o.path = dir_.str() + "/disk";
    o.capacity_bytes = capacity;
    o.min_blob_bytes = 4096;
    auto t = DiskTier::Open(o, [this](std::span<const TierEvent> ev) {
      events_.insert(events_.end(), ev.begin(), ev.end());
    });
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    tier_ = std::move(*t);
  }
  void Put(const TestObject& o) { ASSERT_TRUE(tier_->Put(o.key, o.bytes).ok()); }
  bool Same(const SharedBuffer& a, const SharedBuffer& b) {
    return a.size() == b.size() && std::equal(a.data(), a.data() + a.size(), b.data());
  }

  testing::TempDir dir_;
  std::unique_ptr<DiskTier> tier_;
  std::vector<TierEvent> events_;
};

TEST_F(DiskTierTest, StoresAndReturnsObjects) {
  Open();
  auto small = MakeObject(1, 1024), large = MakeObject(2, 1 << 20);
  Put(small);
  Put(large);
  auto a = tier_->Get(small.key), b = tier_->Get(large.key);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(Same(*a, small.bytes));
  EXPECT_TRUE(Same(*b, large.bytes));
  EXPECT_EQ(tier_->Get(MakeObject(3, 1024).key).code(), ErrorCode::kNotFound);
  EXPECT_EQ(tier_->Stats().used_bytes, small.bytes.size() + large.bytes.size());
}

TEST_F(DiskTierTest, ContentsAndLruOrderSurviveRestart) {
  Open();
  std::vector<TestObject> objs;
  for (uint64_t i = 0; i < 5; ++i) {
    objs.push_back(MakeObject(i, 8192));
    Put(objs.back());
  }
  ASSERT_TRUE(tier_->Get(objs[0].key).ok());  // 0 becomes most recent
  ASSERT_TRUE(tier_->Get(objs[2].key).ok());  // then 2
  auto before = tier_->LruOrder();
  EXPECT_EQ(before.front(), objs[2].key);
  EXPECT_EQ(before.back(), objs[1].key);
  Open();  // reopen: rebuilds the index from RocksDB
  EXPECT_EQ(tier_->LruOrder(), before);
  for (const auto& o : objs) {
    auto r = tier_->Get(o.key);
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(Same(*r, o.bytes));
  }
  EXPECT_EQ(tier_->Stats().entries, 5u);
}

TEST_F(DiskTierTest, EvictsLeastRecentlyUsedToStayUnderCapacity) {
  auto probe = MakeObject(0, 8192);
  Open(probe.bytes.size() * 3);
  auto a = MakeObject(1, 8192), b = MakeObject(2, 8192), c = MakeObject(3, 8192),
       d = MakeObject(4, 8192);
  Put(a);
  Put(b);
  Put(c);
  ASSERT_TRUE(tier_->Pin(a.key).ok());
  Put(d);  // a is oldest but pinned: b goes
  EXPECT_TRUE(tier_->Contains(a.key));
  EXPECT_FALSE(tier_->Contains(b.key));
  EXPECT_LE(tier_->Stats().used_bytes, probe.bytes.size() * 3);
  EXPECT_EQ(tier_->Get(b.key).code(), ErrorCode::kNotFound);
  Open(probe.bytes.size() * 3);  // the eviction was durable too
  EXPECT_FALSE(tier_->Contains(b.key));
  EXPECT_EQ(tier_->Stats().entries, 3u);
}

TEST_F(DiskTierTest, CorruptValueIsAMissAndDeleted) {
  Open();
  auto o = MakeObject(5, 64 * 1024);  // large enough to live in a blob file
  Put(o);
  tier_.reset();
  {
    // Flip one payload byte through RocksDB itself.
    rocksdb::Options opts;
    opts.enable_blob_files = true;
    opts.min_blob_size = 4096;
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {{rocksdb::kDefaultColumnFamilyName, opts},
                                                        {"lru", {}}};
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(opts, dir_.str() + "/disk", cfs, &handles, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    auto kb = o.key.Bytes();
    rocksdb::Slice key(reinterpret_cast<const char*>(kb.data()), 16);
    std::string value;
    ASSERT_TRUE(db->Get({}, handles[0], key, &value).ok());
    value[value.size() - 100] ^= 0x01;
    ASSERT_TRUE(db->Put({}, handles[0], key, value).ok());
    for (auto* h : handles) ASSERT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
    ASSERT_TRUE(db->Close().ok());
  }
  Open();
  ASSERT_TRUE(tier_->Contains(o.key));
  events_.clear();
  EXPECT_EQ(tier_->Get(o.key).code(), ErrorCode::kNotFound);
  EXPECT_FALSE(tier_->Contains(o.key));
  EXPECT_EQ(tier_->Stats().corruptions, 1u);
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].kind, EventKind::kEvict);
  Open();  // deleted for good
  EXPECT_FALSE(tier_->Contains(o.key));
}

// A byte flipped in the blob file itself, under RocksDB: its reads do not
// check their own CRC (the object's checksum is the one check), so this is
// what must catch it.
TEST_F(DiskTierTest, AFlippedByteInTheBlobFileIsAMissAndDeleted) {
  Open();
  auto o = MakeObject(7, 256 * 1024);
  Put(o);
  tier_.reset();
  std::vector<std::filesystem::path> blobs;
  for (const auto& e : std::filesystem::directory_iterator(dir_.str() + "/disk"))
    if (e.path().extension() == ".blob") blobs.push_back(e.path());
  ASSERT_EQ(blobs.size(), 1u);
  {
    // The value is the blob file's last record, before its 32-byte footer.
    std::fstream f(blobs[0], std::ios::in | std::ios::out | std::ios::binary);
    const auto at = static_cast<std::streamoff>(std::filesystem::file_size(blobs[0]) - 32 - 1000);
    char byte = 0;
    f.seekg(at);
    f.read(&byte, 1);
    byte ^= 0x10;
    f.seekp(at);
    f.write(&byte, 1);
  }
  Open();
  ASSERT_TRUE(tier_->Contains(o.key));
  EXPECT_EQ(tier_->Get(o.key).code(), ErrorCode::kNotFound);
  EXPECT_FALSE(tier_->Contains(o.key));
  EXPECT_EQ(tier_->Stats().corruptions, 1u);
}

TEST_F(DiskTierTest, ReportsAdmitsAndEvictions) {
  Open();
  auto o = MakeObject(1, 4096);
  Put(o);
  ASSERT_TRUE(tier_->Remove(o.key).ok());
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(events_[0].kind, EventKind::kAdmit);
  EXPECT_EQ(events_[0].tier, TierKind::kDisk);
  EXPECT_EQ(events_[1].kind, EventKind::kEvict);
  EXPECT_EQ(tier_->Remove(o.key).code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace pikv::storage
