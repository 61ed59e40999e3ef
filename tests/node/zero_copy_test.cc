// The zero-copy channel between a node and the clients on its host: objects
// lent in place under leases, and arena space reserved, filled and committed.
// A real NodeServer (in this process, so its tiers can be inspected) and real
// unix sockets; clients that die are real processes killed with SIGKILL.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "pikv/node/node_server.h"
#include "pikv/proto/chunk_object.h"
#include "pikv/rpc/node_client.h"
#include "pikv/rpc/zero_copy_client.h"
#include "pikv/transport/local_channel.h"
#include "test_support.h"

namespace pikv::node {
namespace {

using rpc::ZeroCopyClient;
using testing::MakeObject;
using testing::TestObject;
using Clock = std::chrono::steady_clock;

constexpr auto kTimeout = std::chrono::seconds(10);
constexpr uint64_t kArena = 4 << 20;
constexpr size_t kObject = 768 << 10;  // five fit in the arena, six do not

bool Same(const SharedBuffer& a, const SharedBuffer& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

// The object with its payload checksum left 0 for the node to seal (and its
// header's own checksum recomputed over that).
std::vector<uint8_t> Unsealed(const TestObject& o) {
  std::vector<uint8_t> unsealed(o.bytes.data(), o.bytes.data() + o.bytes.size());
  auto header = ParseChunkHeader(o.bytes.span());
  EXPECT_TRUE(header.ok() && WriteChunkHeader(*header, 0, unsealed).ok());
  return unsealed;
}

class ZeroCopyTest : public ::testing::Test {
 protected:
  void Start(std::chrono::milliseconds ttl = std::chrono::seconds(30), bool disk = false) {
    NodeOptions o;
    o.node_id = "zc";
    o.endpoints = {"ipc://" + dir_.str() + "/node.sock"};
    o.storage.cpu.capacity_bytes = kArena;
    if (disk) o.storage.disk = storage::DiskTierOptions{.path = dir_.str() + "/disk"};
    o.zero_copy.lease_ttl = ttl;
    auto server = NodeServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    ASSERT_EQ(server_->zero_copy_path(), dir_.str() + "/node.sock.zc");
    node_ = std::make_unique<rpc::NodeClient>(server_->endpoints()[0], kTimeout);
  }
  std::shared_ptr<ZeroCopyClient> Connect() {
    auto c = ZeroCopyClient::Connect(server_->zero_copy_path(), kTimeout);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? *c : nullptr;
  }
  TestObject Put(uint64_t seed) {
    TestObject o = MakeObject(seed, kObject);
    auto put = node_->Put({&o.key, 1}, {&o.bytes, 1});
    EXPECT_TRUE(put.ok() && (*put)[0].ok());
    return o;
  }
  int64_t Stat(const std::string& name) {
    auto s = node_->Stats();
    return s.ok() ? FieldInt(*s, name, -1) : -1;
  }
  // Waits for a counter to reach `value` (releases are asynchronous).
  bool StatReaches(const std::string& name, int64_t value) {
    for (auto end = Clock::now() + kTimeout; Clock::now() < end;) {
      if (Stat(name) == value) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  bool Contains(const ChunkKey& key, TierKind tier = TierKind::kCpu) {
    auto m = node_->Exists({&key, 1});
    return m.ok() && ((*m)[0] & Bit(tier));
  }
  // A helper process holding a lease or a reservation until it is killed.
  std::unique_ptr<testing::ChildProcess> Holder(const std::string& mode, const std::string& arg) {
    auto p = std::make_unique<testing::ChildProcess>(
        testing::BinaryPath("zero_copy_holder"),
        std::vector<std::string>{server_->zero_copy_path(), mode, arg});
    auto line = p->ReadLine(kTimeout);
    EXPECT_EQ(line.value_or("(none)"), "held");
    return p;
  }

  testing::TempDir dir_;
  std::unique_ptr<NodeServer> server_;
  std::unique_ptr<rpc::NodeClient> node_;
};

// What only the disk tier holds is copied up and lent in place, so a reader
// on this host never takes a disk hit by copy over the socket.
TEST_F(ZeroCopyTest, AnObjectOnlyOnDiskIsCopiedUpAndLentInPlace) {
  Start(std::chrono::seconds(30), /*disk=*/true);
  TestObject a = Put(1);
  for (auto end = Clock::now() + kTimeout; !Contains(a.key, TierKind::kDisk);) {
    ASSERT_LT(Clock::now(), end) << "never written through to disk";
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (uint64_t seed = 2; Contains(a.key); ++seed) {  // evicted from CPU by newer objects
    ASSERT_LT(seed, 20u);
    Put(seed);
  }
  // Until the newer objects are written through, the disk queue still holds
  // their memory and a full arena has no room for the copy-up (the reader
  // would then fetch a copy instead, as designed, but this test is about the
  // copy-up).
  ASSERT_TRUE(StatReaches("queue.disk.depth", 0));
  ASSERT_TRUE(Contains(a.key, TierKind::kDisk));
  const int64_t promotions = Stat("storage.promotions");
  auto zc = Connect();
  auto leased = zc->Lease({&a.key, 1}, kTimeout);
  ASSERT_TRUE(leased.ok()) << leased.status().ToString();
  ASSERT_TRUE(leased->objects[0].ok()) << leased->objects[0].status().ToString();
  EXPECT_TRUE(Same(*leased->objects[0], a.bytes));
  EXPECT_TRUE(Contains(a.key));
  EXPECT_EQ(Stat("storage.promotions"), promotions + 1);
  EXPECT_EQ(Stat("zero_copy.leases"), 1);
}

TEST_F(ZeroCopyTest, LeasedViewsAreTheObjectsAndReleaseWithTheLastView) {
  Start();
  TestObject a = Put(1), b = Put(2);
  const ChunkKey absent = MakeObject(3, 1024).key;
  auto zc = Connect();
  std::vector<ChunkKey> keys = {a.key, absent, b.key};
  auto leased = zc->Lease(keys, kTimeout);
  ASSERT_TRUE(leased.ok()) << leased.status().ToString();
  ASSERT_EQ(leased->objects.size(), 3u);
  ASSERT_TRUE(leased->objects[0].ok());
  EXPECT_EQ(leased->objects[1].code(), ErrorCode::kNotFound);
  ASSERT_TRUE(leased->objects[2].ok());
  EXPECT_TRUE(Same(*leased->objects[0], a.bytes));
  EXPECT_TRUE(Same(*leased->objects[2], b.bytes));
  EXPECT_GT(leased->deadline, Clock::now() + std::chrono::seconds(20));
  EXPECT_EQ(Stat("zero_copy.leases"), 1);
  EXPECT_EQ(Stat("zero_copy.lent_bytes"), int64_t(a.bytes.size() + b.bytes.size()));
  SharedBuffer keep = *leased->objects[2];
  leased->objects.clear();
  EXPECT_EQ(Stat("zero_copy.leases"), 1);  // one view still holds it
  keep = {};
  EXPECT_TRUE(StatReaches("zero_copy.leases", 0));
  EXPECT_EQ(Stat("zero_copy.lent_bytes"), 0);
}

TEST_F(ZeroCopyTest, ALeasedObjectIsNeitherEvictedNorItsMemoryReusedUntilReleased) {
  Start();
  TestObject a = Put(10);
  auto zc = Connect();
  auto leased = zc->Lease({&a.key, 1}, kTimeout);
  ASSERT_TRUE(leased.ok() && leased->objects[0].ok());
  SharedBuffer view = *leased->objects[0];
  // Far more than the arena holds: everything else is evicted, never `a`.
  for (uint64_t seed = 11; seed < 30; ++seed) {
    Put(seed);
    ASSERT_TRUE(Contains(a.key)) << "evicted while leased, at put " << seed;
  }
  // Deleted while leased: gone from the index at once, its memory not reused.
  ASSERT_TRUE(node_->Delete({&a.key, 1}).ok());
  EXPECT_FALSE(Contains(a.key));
  const int64_t used_while_leased = Stat("cpu.used_bytes");
  for (uint64_t seed = 30; seed < 40; ++seed) Put(seed);
  EXPECT_TRUE(Same(view, a.bytes)) << "the leased bytes were overwritten";
  EXPECT_EQ(Stat("cpu.used_bytes"), used_while_leased);
  // Released: the range returns to the allocator and is filled again.
  view = {};
  leased->objects.clear();
  ASSERT_TRUE(StatReaches("zero_copy.leases", 0));
  EXPECT_LT(Stat("cpu.used_bytes"), used_while_leased);
  for (uint64_t seed = 40; seed < 45; ++seed) Put(seed);
  EXPECT_EQ(Stat("cpu.entries"), 5);
}

TEST_F(ZeroCopyTest, AnExpiredLeaseEndsAndTheClientKnewItsDeadline) {
  Start(std::chrono::milliseconds(300));
  TestObject a = Put(50);
  auto zc = Connect();
  const auto asked = Clock::now();
  auto leased = zc->Lease({&a.key, 1}, kTimeout);
  const auto answered = Clock::now();
  ASSERT_TRUE(leased.ok() && leased->objects[0].ok());
  // Counted from when the request left: no later than the node's expiry.
  EXPECT_GE(leased->deadline, asked + std::chrono::milliseconds(300));
  EXPECT_LE(leased->deadline, answered + std::chrono::milliseconds(300));
  ASSERT_TRUE(StatReaches("zero_copy.expired", 1));
  EXPECT_EQ(Stat("zero_copy.leases"), 0);
  EXPECT_GE(Clock::now(),
            leased->deadline);  // the node never ends a lease before the client's deadline
  // No longer held: capacity pressure evicts it.
  for (uint64_t seed = 51; seed < 60; ++seed) Put(seed);
  EXPECT_FALSE(Contains(a.key));
}

TEST_F(ZeroCopyTest, AKilledClientsLeaseEndsWithIt) {
  Start();
  TestObject a = Put(60);
  auto holder = Holder("lease", a.key.Hex());
  EXPECT_EQ(Stat("zero_copy.leases"), 1);
  for (uint64_t seed = 61; seed < 70; ++seed) Put(seed);
  EXPECT_TRUE(Contains(a.key));  // held by the live client
  holder->Signal(SIGKILL);
  ASSERT_TRUE(StatReaches("zero_copy.leases", 0));
  EXPECT_EQ(Stat("zero_copy.dropped"), 1);
  for (uint64_t seed = 70; seed < 80; ++seed) Put(seed);
  EXPECT_FALSE(Contains(a.key));
}

TEST_F(ZeroCopyTest, AReservationFilledInPlaceIsVerifiedThenServed) {
  Start();
  TestObject a = MakeObject(80, kObject);
  auto zc = Connect();
  auto space = zc->Reserve(a.bytes.size(), kTimeout);
  ASSERT_TRUE(space.ok()) << space.status().ToString();
  EXPECT_EQ(Stat("zero_copy.reservations"), 1);
  std::memcpy(space->bytes().data(), a.bytes.data(), a.bytes.size());
  ASSERT_TRUE(zc->Commit(a.key, std::move(*space), kTimeout).ok());
  EXPECT_EQ(Stat("zero_copy.reservations"), 0);
  EXPECT_EQ(Stat("zero_copy.commits"), 1);
  auto got = node_->Get({&a.key, 1});
  ASSERT_TRUE(got.ok() && (*got)[0].ok());
  EXPECT_TRUE(Same(*(*got)[0], a.bytes));
}

// A batch reserves and commits in one round trip each; each object has its
// own outcome: one with no room is refused while the others are handed out,
// a corrupt one refused while the others are admitted.
TEST_F(ZeroCopyTest, ABatchIsReservedAndCommittedWithAnOutcomePerObject) {
  Start();
  constexpr size_t kSmall = 256 << 10;  // four within a client's share of the arena
  std::vector<TestObject> objects;
  for (uint64_t seed = 85; seed < 89; ++seed) objects.push_back(MakeObject(seed, kSmall));
  auto zc = Connect();
  const int64_t requests = Stat("zero_copy.requests");
  std::vector<uint64_t> sizes;
  for (const auto& o : objects) sizes.push_back(o.bytes.size());
  sizes.push_back(kArena + 1);  // no room for it
  auto spaces = zc->ReserveMany(sizes, kTimeout);
  ASSERT_TRUE(spaces.ok()) << spaces.status().ToString();
  ASSERT_EQ(spaces->size(), sizes.size());
  EXPECT_FALSE(spaces->back().ok());
  EXPECT_EQ(Stat("zero_copy.reservations"), 4);
  std::vector<ChunkKey> keys;
  std::vector<ZeroCopyClient::Space> filled;
  for (size_t i = 0; i < objects.size(); ++i) {
    ASSERT_TRUE((*spaces)[i].ok()) << (*spaces)[i].status().ToString();
    std::memcpy((*spaces)[i]->bytes().data(), objects[i].bytes.data(), sizes[i]);
    keys.push_back(objects[i].key);
    filled.push_back(std::move(*(*spaces)[i]));
  }
  filled[2].bytes()[sizes[2] - 1] ^= 1;  // one payload bit
  auto committed = zc->CommitMany(keys, std::move(filled), kTimeout);
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  EXPECT_EQ(Stat("zero_copy.requests"), requests + 2);
  for (size_t i = 0; i < objects.size(); ++i) {
    EXPECT_EQ((*committed)[i].ok(), i != 2) << i;
    EXPECT_EQ(Contains(objects[i].key), i != 2) << i;
  }
  EXPECT_EQ(Stat("zero_copy.reservations"), 0);
  EXPECT_EQ(Stat("zero_copy.commit_failures"), 1);
  EXPECT_EQ(Stat("cpu.used_bytes"), int64_t(sizes[0] + sizes[1] + sizes[3]));
}

// Past its share of the arena, a batch's reservation is refused before any
// space is made for it (making space evicts: one request must not flush the
// tier); the rest of the batch is handed out. A commit naming a space that
// is empty is refused for that space alone.
TEST_F(ZeroCopyTest, ABatchPastTheClientsShareEvictsNothing) {
  Start();
  std::vector<TestObject> held;
  for (uint64_t seed = 140; seed < 143; ++seed) held.push_back(Put(seed));
  std::vector<TestObject> batch;
  for (uint64_t seed = 143; seed < 146; ++seed) batch.push_back(MakeObject(seed, kObject));
  auto zc = Connect();
  std::vector<uint64_t> sizes;
  for (const auto& o : batch) sizes.push_back(o.bytes.size());
  auto spaces = zc->ReserveMany(sizes, kTimeout);
  ASSERT_TRUE(spaces.ok()) << spaces.status().ToString();
  EXPECT_TRUE((*spaces)[0].ok());
  EXPECT_TRUE((*spaces)[1].ok());
  EXPECT_EQ((*spaces)[2].code(), ErrorCode::kRejected);  // two fit the share, three do not
  for (const auto& o : held) EXPECT_TRUE(Contains(o.key)) << "evicted for a refused reservation";
  EXPECT_EQ(Stat("cpu.evictions"), 0);

  std::vector<ChunkKey> keys = {batch[0].key, batch[1].key};
  std::vector<ZeroCopyClient::Space> filled;
  filled.emplace_back();  // an empty space
  filled.push_back(std::move(*(*spaces)[1]));
  std::memcpy(filled[1].bytes().data(), batch[1].bytes.data(), sizes[1]);
  auto committed = zc->CommitMany(keys, std::move(filled), kTimeout);
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  EXPECT_EQ((*committed)[0].code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE((*committed)[1].ok()) << (*committed)[1].ToString();
  EXPECT_FALSE(Contains(batch[0].key));
  EXPECT_TRUE(Contains(batch[1].key));
}

TEST_F(ZeroCopyTest, AnUnsealedObjectIsSealedByTheNodeOnlyWhenAsked) {
  Start();
  TestObject a = MakeObject(85, kObject);
  const std::vector<uint8_t> unsealed = Unsealed(a);
  auto zc = Connect();
  for (bool seal : {false, true}) {
    auto space = zc->Reserve(unsealed.size(), kTimeout);
    ASSERT_TRUE(space.ok());
    std::memcpy(space->bytes().data(), unsealed.data(), unsealed.size());
    Status s = zc->Commit(a.key, std::move(*space), kTimeout, seal);
    EXPECT_EQ(s.ok(), seal) << s.ToString();
    EXPECT_EQ(Contains(a.key), seal);
  }
  auto got = node_->Get({&a.key, 1});
  ASSERT_TRUE(got.ok() && (*got)[0].ok());
  EXPECT_TRUE(Same(*(*got)[0], a.bytes));  // sealed, it is the object built whole
}

// A writer marks what it has written as it goes (the node hashes it then);
// the sealed object must be the one built whole, however the marks fall.
TEST_F(ZeroCopyTest, AnObjectMarkedWrittenAsItIsFilledSealsToTheSameBytes) {
  Start();
  TestObject a = MakeObject(86, kObject);
  const std::vector<uint8_t> unsealed = Unsealed(a);
  const size_t size = unsealed.size();
  auto zc = Connect();
  // Fills `space` in the order of `marks`, marking each end; false marks
  // (backwards, past the end) are sent too and must change nothing.
  auto fill = [&](const ZeroCopyClient::Space& space, std::vector<size_t> marks) {
    size_t done = 0;
    for (size_t m : marks) {
      if (m > done && m <= size) {
        std::memcpy(space.bytes().data() + done, unsealed.data() + done, m - done);
        done = m;
      }
      space.Written(m);
    }
    std::memcpy(space.bytes().data() + done, unsealed.data() + done, size - done);
  };
  const std::vector<std::vector<size_t>> cases = {
      {10, 14, 4096, 100 << 10, 300 << 10, size - 1},  // through the header's size field
      {size},                                          // all of it, then commit
      {200 << 10, 100 << 10, size + 1, 400 << 10},     // a mark backwards and one past the end
      {},                                              // no marks: hashed whole
  };
  for (const auto& marks : cases) {
    ASSERT_TRUE(node_->Delete({&a.key, 1}).ok());
    auto space = zc->Reserve(size, kTimeout);
    ASSERT_TRUE(space.ok());
    fill(*space, marks);
    Status s = zc->Commit(a.key, std::move(*space), kTimeout, /*seal=*/true);
    ASSERT_TRUE(s.ok()) << s.ToString();
    auto got = node_->Get({&a.key, 1});
    ASSERT_TRUE(got.ok() && (*got)[0].ok());
    EXPECT_TRUE(Same(*(*got)[0], a.bytes)) << "marks: " << marks.size();
  }
  EXPECT_EQ(Stat("zero_copy.sealed_ahead"), 3);
  EXPECT_EQ(Stat("zero_copy.sealed_whole"), 1);
  EXPECT_EQ(Stat("zero_copy.errors"), 1);  // the mark backwards (the client drops one past the end)
}

// A writer that marks bytes before its header is there (so the node took
// the wrong bytes for the payload) still gets the right seal: the node sees
// the header has moved and hashes the whole payload.
TEST_F(ZeroCopyTest, MarksMadeBeforeTheHeaderWasWrittenAreNotTrusted) {
  Start();
  TestObject a = MakeObject(87, kObject);
  const std::vector<uint8_t> unsealed = Unsealed(a);
  auto zc = Connect();
  auto space = zc->Reserve(unsealed.size(), kTimeout);
  ASSERT_TRUE(space.ok());
  uint8_t* out = space->bytes().data();
  const size_t header_size = ParseChunkHeader(a.bytes.span())->header_size;
  std::memset(out, 0, header_size);
  std::memcpy(out + header_size, unsealed.data() + header_size, unsealed.size() - header_size);
  space->Written(unsealed.size() / 2);
  // A round trip on the channel: the node has hashed the mark by its reply.
  ASSERT_TRUE(zc->Lease({&a.key, 1}, kTimeout).ok());
  std::memcpy(out, unsealed.data(), header_size);
  ASSERT_TRUE(zc->Commit(a.key, std::move(*space), kTimeout, /*seal=*/true).ok());
  auto got = node_->Get({&a.key, 1});
  ASSERT_TRUE(got.ok() && (*got)[0].ok());
  EXPECT_TRUE(Same(*(*got)[0], a.bytes));
  EXPECT_EQ(Stat("zero_copy.sealed_whole"), 1);
  EXPECT_EQ(Stat("zero_copy.sealed_ahead"), 0);
}

TEST_F(ZeroCopyTest, ACorruptOrMislabelledCommitIsRefusedAndFreesItsSpace) {
  Start();
  TestObject a = MakeObject(90, kObject), other = MakeObject(91, kObject);
  auto zc = Connect();
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto space = zc->Reserve(a.bytes.size(), kTimeout);
    ASSERT_TRUE(space.ok());
    std::memcpy(space->bytes().data(), a.bytes.data(), a.bytes.size());
    if (attempt == 0) space->bytes()[a.bytes.size() - 1] ^= 1;  // one payload bit
    const ChunkKey& key = attempt == 0 ? a.key : other.key;     // then another key's name
    Status s = zc->Commit(key, std::move(*space), kTimeout);
    EXPECT_FALSE(s.ok());
    EXPECT_FALSE(Contains(a.key));
    EXPECT_FALSE(Contains(other.key));
    EXPECT_EQ(Stat("cpu.used_bytes"), 0);
  }
  EXPECT_EQ(Stat("zero_copy.commit_failures"), 2);
  // An honest commit of the same key afterwards lands.
  auto space = zc->Reserve(a.bytes.size(), kTimeout);
  ASSERT_TRUE(space.ok());
  std::memcpy(space->bytes().data(), a.bytes.data(), a.bytes.size());
  ASSERT_TRUE(zc->Commit(a.key, std::move(*space), kTimeout).ok());
  EXPECT_TRUE(Contains(a.key));
}

TEST_F(ZeroCopyTest, AnUncommittedSpaceIsGivenBackAndAnExpiredOneCannotCommit) {
  Start(std::chrono::milliseconds(300));
  TestObject a = MakeObject(100, kObject);
  auto zc = Connect();
  {
    auto space = zc->Reserve(a.bytes.size(), kTimeout);
    ASSERT_TRUE(space.ok());
    EXPECT_GE(Stat("cpu.used_bytes"), int64_t(a.bytes.size()));
  }
  ASSERT_TRUE(StatReaches("cpu.used_bytes", 0));
  auto space = zc->Reserve(a.bytes.size(), kTimeout);
  ASSERT_TRUE(space.ok());
  std::memcpy(space->bytes().data(), a.bytes.data(), a.bytes.size());
  ASSERT_TRUE(StatReaches("zero_copy.expired", 1));
  EXPECT_EQ(Stat("cpu.used_bytes"), 0);
  EXPECT_EQ(zc->Commit(a.key, std::move(*space), kTimeout).code(), ErrorCode::kTimeout);
  EXPECT_FALSE(Contains(a.key));
}

TEST_F(ZeroCopyTest, AClientKilledBetweenReserveAndCommitLeaksNothing) {
  Start();
  auto holder = Holder("reserve", std::to_string(3 << 19));
  EXPECT_EQ(Stat("zero_copy.reservations"), 1);
  EXPECT_GE(Stat("cpu.used_bytes"), 3 << 19);
  holder->Signal(SIGKILL);
  ASSERT_TRUE(StatReaches("zero_copy.reservations", 0));
  EXPECT_EQ(Stat("cpu.used_bytes"), 0);
  for (uint64_t seed = 110; seed < 115; ++seed) Put(seed);
  EXPECT_EQ(Stat("cpu.entries"), 5);  // a leaked reservation would leave room for three
}

TEST_F(ZeroCopyTest, HostileRequestsAreRefusedAndTheNodeServesOn) {
  Start();
  TestObject a = Put(120);
  auto zc = Connect();
  auto leased = zc->Lease({&a.key, 1}, kTimeout);
  ASSERT_TRUE(leased.ok() && leased->objects[0].ok());
  // Another client cannot give back, or commit, what is not its own.
  auto raw = ConnectLocal(server_->zero_copy_path(), kTimeout);
  ASSERT_TRUE(raw.ok());
  int arena_fd = -1;
  ASSERT_TRUE(RecvLocal(*raw, WireLimits{}, &arena_fd).ok());
  EXPECT_GE(arena_fd, 0);
  close(arena_fd);
  Header release;
  release.type = MsgType::kRelease;
  for (int64_t id = 0; id < 100; ++id) release.values.push_back(id);
  ASSERT_TRUE(SendLocal(*raw, release).ok());
  Header commit;
  commit.type = MsgType::kCommit;
  commit.request_id = 1;
  commit.keys = {a.key};
  commit.values = {1};
  ASSERT_TRUE(SendLocal(*raw, commit).ok());
  auto reply = RecvLocal(*raw, WireLimits{});
  ASSERT_TRUE(reply.ok());
  ASSERT_EQ(reply->values.size(), 1u);
  EXPECT_EQ(reply->values[0], static_cast<int64_t>(ErrorCode::kNotFound));
  EXPECT_EQ(Stat("zero_copy.leases"), 1);  // the first client's lease stands
  // Sizes out of range, each refused on its own; batches that name no
  // size, too many, or not one reservation per key, refused whole.
  Header reserve;
  reserve.type = MsgType::kReserve;
  reserve.values = {0, -5, int64_t{1} << 40};
  ASSERT_TRUE(SendLocal(*raw, reserve).ok());
  reply = RecvLocal(*raw, WireLimits{});
  ASSERT_TRUE(reply.ok());
  ASSERT_EQ(reply->values.size(), 9u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(reply->values[3 * i], static_cast<int64_t>(ErrorCode::kTooLarge)) << i;
  Header bad_reserve = reserve, bad_commit = commit;
  for (Header* h : {&reserve, &bad_reserve, &bad_commit}) {
    h->values.clear();
    if (h == &bad_reserve) h->values.assign(WireLimits{}.max_batch + 1, 4096);
    if (h == &bad_commit) h->values = {1, 2};
    ASSERT_TRUE(SendLocal(*raw, *h).ok());
    reply = RecvLocal(*raw, WireLimits{});
    ASSERT_TRUE(reply.ok());
    EXPECT_EQ(reply->status, ErrorCode::kInvalidArgument) << MsgTypeName(h->type);
  }
  EXPECT_EQ(Stat("cpu.used_bytes"), int64_t(a.bytes.size()));  // nothing reserved
  // Written marks of reservations not its own, or malformed: no reply (the
  // next reply read must answer the next request), only errors counted.
  const int64_t errors_before = Stat("zero_copy.errors");
  const std::vector<std::vector<int64_t>> marks = {
      {1, 10}, {}, {1}, {1, 2, 3}, {-1, 5}, {1, -5}, {int64_t{1} << 62, int64_t{1} << 62}};
  for (const auto& values : marks) {
    Header written;
    written.type = MsgType::kWritten;
    written.values = values;
    ASSERT_TRUE(SendLocal(*raw, written).ok());
  }
  Header get;
  get.type = MsgType::kGet;
  ASSERT_TRUE(SendLocal(*raw, get).ok());
  reply = RecvLocal(*raw, WireLimits{});
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->status, ErrorCode::kUnsupported);
  EXPECT_EQ(reply->type, MsgType::kGet);
  EXPECT_EQ(Stat("zero_copy.errors"), errors_before + int64_t(marks.size()) + 1);
  // A length over the limit, then garbage: the connection is dropped.
  const uint8_t huge[4] = {0xff, 0xff, 0xff, 0xff};
  ASSERT_EQ(send(*raw, huge, 4, MSG_NOSIGNAL), 4);
  SetLocalTimeout(*raw, kTimeout);
  char byte;
  EXPECT_EQ(recv(*raw, &byte, 1, 0), 0);
  close(*raw);
  EXPECT_GE(Stat("zero_copy.errors"), 1);
  // The honest client and the node are unharmed.
  EXPECT_TRUE(Same(*leased->objects[0], a.bytes));
  auto again = zc->Lease({&a.key, 1}, kTimeout);
  ASSERT_TRUE(again.ok() && again->objects[0].ok());
}

TEST_F(ZeroCopyTest, AClientIsRefusedPastItsShareOfTheArena) {
  Start();
  std::vector<TestObject> objects;
  for (uint64_t seed = 130; seed < 134; ++seed) objects.push_back(Put(seed));
  auto zc = Connect();
  std::vector<ZeroCopyClient::Leased> held;
  for (const auto& o : objects) {
    auto leased = zc->Lease({&o.key, 1}, kTimeout);
    if (!leased.ok()) {
      EXPECT_EQ(leased.code(), ErrorCode::kRejected);
      break;
    }
    held.push_back(std::move(*leased));
  }
  EXPECT_EQ(held.size(), 2u);  // half of the 4 MiB arena: two objects of 768 KiB
  EXPECT_EQ(Stat("zero_copy.refused"), 1);
}

}  // namespace
}  // namespace pikv::node
