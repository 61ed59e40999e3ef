#include "pikv/controller/cluster_state.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <random>
#include <set>

namespace pikv::controller {
namespace {

using namespace std::chrono_literals;

ChunkKey Key(uint64_t i) { return {i * 0x9e3779b97f4a7c15ULL + 3, i * 0xc2b2ae3d27d4eb4fULL + 5}; }

class ClusterStateTest : public ::testing::Test {
 protected:
  ClusterState state_{{2500ms, 5000ms}, 77};
  Clock::time_point now_ = Clock::now();

  NodeRegistration Reg(const std::string& id, uint64_t incarnation) {
    return {id,      "host-" + id, "tcp://" + id + ":7400", "ipc:///tmp/" + id, incarnation,
            1 << 30, 1ull << 34};
  }
  ClusterState::Outcome Events(const std::string& id, uint64_t inc, uint64_t seq,
                               std::vector<std::pair<ChunkKey, int64_t>> ev) {
    std::vector<ChunkKey> keys;
    std::vector<int64_t> values;
    for (auto& [k, v] : ev) {
      keys.push_back(k);
      values.push_back(v);
    }
    return state_.ApplyEvents(id, inc, seq, {keys, values, {}}, now_);
  }
  void Inventory(const std::string& id, uint64_t inc, uint64_t seq,
                 std::vector<std::pair<ChunkKey, TierKind>> inv) {
    std::vector<ChunkKey> keys;
    std::vector<int64_t> values;
    for (auto& [k, t] : inv) {
      keys.push_back(k);
      values.push_back(static_cast<int64_t>(t));
    }
    ASSERT_EQ(state_.ApplyInventory(id, inc, seq, 0, true, {keys, values, {}}, now_),
              ClusterState::Outcome::kApplied);
  }
  std::set<std::pair<std::string, TierKind>> Where(const ChunkKey& k) {
    std::set<std::pair<std::string, TierKind>> out;
    for (const auto& r : state_.Locate(k, "")) out.insert({r.node_id, r.location.tier});
    return out;
  }
};

// A registry the nodes may still be filling says so, for one suspect_after
// from its start or reset (a new leadership).
TEST(ClusterStateFilling, LastsOneSuspectIntervalFromEachReset) {
  ClusterState::Options options;
  options.suspect_after = std::chrono::milliseconds(500);
  ClusterState state(options, 1);
  const auto t0 = Clock::now();
  EXPECT_TRUE(state.Filling(t0));
  EXPECT_FALSE(state.Filling(t0 + std::chrono::milliseconds(600)));
  state.Reset(2);
  const auto t1 = Clock::now();
  EXPECT_TRUE(state.Filling(t1 + std::chrono::milliseconds(100)));
  EXPECT_FALSE(state.Filling(t1 + std::chrono::milliseconds(600)));
}

TEST_F(ClusterStateTest, EventsApplyInOrderAndDuplicatesAreIgnored) {
  ASSERT_TRUE(state_.Register(Reg("a", 1), now_).ok());
  Inventory("a", 1, 0, {});
  EXPECT_EQ(Events("a", 1, 1, {{Key(1), EncodeEvent(TierKind::kCpu, true)}}),
            ClusterState::Outcome::kApplied);
  EXPECT_EQ(Events("a", 1, 1, {{Key(2), EncodeEvent(TierKind::kCpu, true)}}),
            ClusterState::Outcome::kIgnored);
  EXPECT_EQ(Where(Key(1)).size(), 1u);
  EXPECT_TRUE(Where(Key(2)).empty());
  EXPECT_EQ(Events("a", 1, 2, {{Key(1), EncodeEvent(TierKind::kCpu, false)}}),
            ClusterState::Outcome::kApplied);
  EXPECT_TRUE(Where(Key(1)).empty());
}

// The events rate moves on the controller's ticks, not on reads: reading
// the stats twice gives one answer.
TEST_F(ClusterStateTest, TheEventRateAdvancesOnTicksNotOnReads) {
  ASSERT_TRUE(state_.Register(Reg("a", 1), now_).ok());
  Inventory("a", 1, 0, {});
  state_.Tick(now_);
  const uint64_t before = state_.Stats().events_applied;
  ASSERT_EQ(Events("a", 1, 1,
                   {{Key(1), EncodeEvent(TierKind::kCpu, true)},
                    {Key(2), EncodeEvent(TierKind::kCpu, true)},
                    {Key(3), EncodeEvent(TierKind::kDisk, true)}}),
            ClusterState::Outcome::kApplied);
  const uint64_t applied = state_.Stats().events_applied - before;
  ASSERT_GT(applied, 0u);
  EXPECT_EQ(state_.Stats().events_per_second, 0) << "no window has ended yet";
  state_.Tick(now_ + 500ms);
  EXPECT_EQ(state_.Stats().events_per_second, 0) << "a window lasts at least a second";
  state_.Tick(now_ + 2s);
  EXPECT_DOUBLE_EQ(state_.Stats().events_per_second, applied / 2.0);
  EXPECT_DOUBLE_EQ(state_.Stats().events_per_second, applied / 2.0);
  state_.Tick(now_ + 4s);
  EXPECT_EQ(state_.Stats().events_per_second, 0) << "no events in the last window";
}

TEST_F(ClusterStateTest, AGapAsksForAResyncAndTheInventoryReplacesTheSubtree) {
  ASSERT_TRUE(state_.Register(Reg("a", 1), now_).ok());
  Inventory("a", 1, 0, {{Key(1), TierKind::kCpu}});
  EXPECT_EQ(Events("a", 1, 3, {{Key(2), EncodeEvent(TierKind::kCpu, true)}}),
            ClusterState::Outcome::kNeedResync);
  EXPECT_EQ(Events("a", 1, 4, {{Key(3), EncodeEvent(TierKind::kCpu, true)}}),
            ClusterState::Outcome::kIgnored);
  Inventory("a", 1, 4, {{Key(2), TierKind::kDisk}, {Key(3), TierKind::kCpu}});
  EXPECT_TRUE(Where(Key(1)).empty());
  EXPECT_EQ(Where(Key(2)), (std::set<std::pair<std::string, TierKind>>{{"a", TierKind::kDisk}}));
  EXPECT_EQ(Events("a", 1, 5, {{Key(4), EncodeEvent(TierKind::kCpu, true)}}),
            ClusterState::Outcome::kApplied);
}

TEST_F(ClusterStateTest, SilentNodesBecomeSuspectThenDeadAndLoseTheirSubtree) {
  ASSERT_TRUE(state_.Register(Reg("a", 1), now_).ok());
  ASSERT_TRUE(state_.Register(Reg("b", 1), now_).ok());
  Inventory("a", 1, 0, {{Key(1), TierKind::kCpu}});
  Inventory("b", 1, 0, {{Key(1), TierKind::kCpu}});
  now_ += 3s;
  ASSERT_TRUE(state_.Heartbeat("b", 1, {}, now_).ok());
  EXPECT_TRUE(state_.Tick(now_).died.empty());
  EXPECT_EQ(state_.Nodes(now_)[0].state, NodeState::kSuspect);
  EXPECT_EQ(state_.Locate(Key(1), "host-a").front().node_id, "b");  // suspect ranks last
  now_ += 3s;
  ASSERT_TRUE(state_.Heartbeat("b", 1, {}, now_).ok());
  EXPECT_EQ(state_.Tick(now_).died, std::vector<std::string>{"a"});
  EXPECT_EQ(Where(Key(1)), (std::set<std::pair<std::string, TierKind>>{{"b", TierKind::kCpu}}));
  EXPECT_EQ(state_.Heartbeat("a", 1, {}, now_).code(),
            ErrorCode::kNotFound);  // must register again
}

TEST_F(ClusterStateTest, LocateOrdersByHostTierAndLoad) {
  for (const char* id : {"a", "b", "c"}) ASSERT_TRUE(state_.Register(Reg(id, 1), now_).ok());
  Inventory("a", 1, 0, {{Key(1), TierKind::kDisk}});
  Inventory("b", 1, 0, {{Key(1), TierKind::kCpu}});
  Inventory("c", 1, 0, {{Key(1), TierKind::kCpu}});
  ASSERT_TRUE(state_.Heartbeat("b", 1, NodeUsage{.requests = 0}, now_).ok());
  ASSERT_TRUE(state_.Heartbeat("c", 1, NodeUsage{.requests = 0}, now_).ok());
  ASSERT_TRUE(state_.Heartbeat("b", 1, NodeUsage{.requests = 5000}, now_ + 1s).ok());
  ASSERT_TRUE(state_.Heartbeat("c", 1, NodeUsage{.requests = 10}, now_ + 1s).ok());
  auto r = state_.Locate(Key(1), "host-a");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].node_id, "a");  // same host wins even from disk
  EXPECT_EQ(r[1].node_id, "c");  // then CPU, the lighter node first
  EXPECT_EQ(r[2].node_id, "b");
}

TEST_F(ClusterStateTest, RegistrationsWithUnusableNamesOrAddressesAreRefused) {
  auto with = [&](auto change) {
    NodeRegistration r = Reg("a", 1);
    change(r);
    return state_.Register(r, now_).code();
  };
  EXPECT_EQ(with([](auto& r) { r.id = "bad\xff"; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& r) { r.id = "inject\npikv_fake 1"; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& r) { r.host = "h\xc3\x28"; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& r) { r.tcp = "garbage"; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& r) { r.tcp = "ipc:///x"; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& r) { r.tcp = "tcp://0.0.0.0:7400"; }), ErrorCode::kInvalidArgument)
      << "peers would dial themselves";
  EXPECT_EQ(with([](auto& r) { r.tcp = "tcp://[::]:7400"; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& r) { r.ipc = "tcp://h:1"; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(state_.node_count(), 0u);
  EXPECT_EQ(with([](auto& r) { r.ipc = ""; }), ErrorCode::kOk);  // tcp-only nodes are fine
}

// Registrations under ever new ids used to fill the table for good.
TEST_F(ClusterStateTest, GhostNodesCannotLockRealNodesOut) {
  for (size_t i = 0; i < Registry::kMaxNodes; ++i)
    ASSERT_TRUE(state_.Register(Reg("ghost-" + std::to_string(i), 1), now_).ok()) << i;
  EXPECT_EQ(state_.Register(Reg("real", 1), now_).code(), ErrorCode::kRejected)
      << "while every ghost is alive the table is full";
  now_ += 6s;  // the ghosts never heartbeat: dead
  EXPECT_EQ(state_.Tick(now_).died.size(), Registry::kMaxNodes);
  ASSERT_TRUE(state_.Register(Reg("real", 1), now_).ok()) << "a dead ghost's entry is reclaimed";
  Inventory("real", 1, 0, {{Key(1), TierKind::kCpu}});
  EXPECT_EQ(Where(Key(1)), (std::set<std::pair<std::string, TierKind>>{{"real", TierKind::kCpu}}));
  now_ += 11min;  // past forget_after: the rest go
  ASSERT_TRUE(state_.Heartbeat("real", 1, {}, now_).ok());
  EXPECT_EQ(state_.Tick(now_).forgotten.size(), Registry::kMaxNodes - 1);
  EXPECT_EQ(state_.node_count(), 1u);
  EXPECT_EQ(state_.Nodes(now_).size(), 1u);
  EXPECT_EQ(Where(Key(1)).size(), 1u);
}

TEST_F(ClusterStateTest, AnInventoryWithAMissingPartIsAskedForAgain) {
  ASSERT_TRUE(state_.Register(Reg("a", 1), now_).ok());
  std::vector<ChunkKey> k1 = {Key(1)}, k2 = {Key(2)}, k3 = {Key(3)};
  std::vector<int64_t> cpu = {0};
  EXPECT_EQ(state_.ApplyInventory("a", 1, 0, 0, false, {k1, cpu, {}}, now_),
            ClusterState::Outcome::kApplied);
  // Part 1 is lost; part 2 arrives.
  EXPECT_EQ(state_.ApplyInventory("a", 1, 0, 2, true, {k3, cpu, {}}, now_),
            ClusterState::Outcome::kNeedResync);
  EXPECT_TRUE(state_.Nodes(now_)[0].resync_pending);
  // The node sends it whole again.
  for (uint64_t part = 0; part < 3; ++part) {
    const auto& keys = part == 0 ? k1 : part == 1 ? k2 : k3;
    EXPECT_EQ(state_.ApplyInventory("a", 1, 0, part, part == 2, {keys, cpu, {}}, now_),
              ClusterState::Outcome::kApplied);
  }
  EXPECT_FALSE(state_.Nodes(now_)[0].resync_pending);
  for (int i = 1; i <= 3; ++i) EXPECT_EQ(Where(Key(i)).size(), 1u) << i;
}

TEST_F(ClusterStateTest, AnOverdueInventoryIsRequestedAtMostOncePerSuspectInterval) {
  ASSERT_TRUE(state_.Register(Reg("a", 1), now_).ok());
  EXPECT_FALSE(state_.TakeResyncRequest("a", 1, now_ + 1s)) << "registering asked already";
  EXPECT_TRUE(state_.TakeResyncRequest("a", 1, now_ + 3s));
  EXPECT_FALSE(state_.TakeResyncRequest("a", 1, now_ + 4s));
  EXPECT_TRUE(state_.TakeResyncRequest("a", 1, now_ + 6s));
  Inventory("a", 1, 0, {});
  EXPECT_FALSE(state_.TakeResyncRequest("a", 1, now_ + 60s)) << "nothing is pending";
}

TEST_F(ClusterStateTest, RemoteTierLocationsOutliveTheWriter) {
  ASSERT_TRUE(state_.Register(Reg("a", 1), now_).ok());
  Inventory("a", 1, 0, {});
  ASSERT_EQ(Events("a", 1, 1, {{Key(1), EncodeEvent(TierKind::kRemote, true)}}),
            ClusterState::Outcome::kApplied);
  now_ += 6s;
  state_.Tick(now_);
  ASSERT_EQ(state_.Locate(Key(1), "").size(), 1u);
  EXPECT_EQ(state_.Locate(Key(1), "")[0].location.tier, TierKind::kRemote);
}

// Scoring answers what the registry holds: each chunk's tokens count once
// per node, in the cheapest reach that node has (its own CPU or disk, the
// shared tier, a pull from an alive peer, or computed); a dead node's
// copies count for no one, a suspect's only for itself.
TEST_F(ClusterStateTest, ScoreCountsEachChunkInTheCheapestReachEachNodeHas) {
  for (const char* id : {"a", "b", "c", "d", "e"})
    ASSERT_TRUE(state_.Register(Reg(id, 1), now_).ok());
  const std::vector<ChunkKey> k = {Key(1), Key(2), Key(3), Key(4), Key(5), Key(6)};
  const std::vector<int64_t> tokens = {100, 200, 300, 400, 500, 50};
  Inventory("a", 1, 0, {{k[0], TierKind::kCpu}, {k[1], TierKind::kDisk}, {k[5], TierKind::kCpu}});
  Inventory("b", 1, 0, {{k[0], TierKind::kDisk}});
  Inventory("c", 1, 0, {{k[5], TierKind::kCpu}, {k[5], TierKind::kDisk}});
  ASSERT_EQ(Events("c", 1, 1, {{k[2], EncodeEvent(TierKind::kRemote, true)}}),
            ClusterState::Outcome::kApplied);
  Inventory("d", 1, 0, {{k[3], TierKind::kCpu}});  // d dies below
  Inventory("e", 1, 0, {{k[4], TierKind::kCpu}});  // e turns suspect
  now_ += 3s;
  for (const char* id : {"a", "b", "c", "e"}) ASSERT_TRUE(state_.Heartbeat(id, 1, {}, now_).ok());
  now_ += 3s;
  for (const char* id : {"a", "b", "c"}) ASSERT_TRUE(state_.Heartbeat(id, 1, {}, now_).ok());
  ASSERT_EQ(state_.Tick(now_).died, std::vector<std::string>{"d"});

  const auto all = [](const Registry::Provenance&) { return true; };
  std::map<std::string, NodeScore> by_id;
  for (NodeScore& n : state_.Score(k, tokens, all, {})) by_id[n.id] = n;
  using T = std::array<uint64_t, kNumReaches>;  // cpu, disk, remote, peer, missing
  ASSERT_EQ(by_id.size(), 4u) << "d is dead: not a candidate";
  EXPECT_EQ(by_id["a"].tokens, (T{150, 200, 300, 0, 900}));
  EXPECT_EQ(by_id["b"].tokens, (T{0, 100, 300, 250, 900}));
  EXPECT_EQ(by_id["c"].tokens, (T{50, 0, 300, 300, 900}));
  EXPECT_EQ(by_id["e"].tokens, (T{500, 0, 300, 350, 400}));
  EXPECT_FALSE(by_id["e"].alive);
  // A prefix scorer's count: chunks the node holds, from the first on.
  EXPECT_EQ(by_id["a"].prefix_tokens, 300u);
  EXPECT_EQ(by_id["b"].prefix_tokens, 100u);
  EXPECT_EQ(by_id["c"].prefix_tokens, 0u);
  // The same chunks in another order score the same, but the prefix.
  const std::vector<ChunkKey> permuted = {k[5], k[2], k[1], k[0], k[4], k[3]};
  const std::vector<int64_t> permuted_tokens = {50, 300, 200, 100, 500, 400};
  for (const NodeScore& n : state_.Score(permuted, permuted_tokens, all, {})) {
    EXPECT_EQ(n.tokens, by_id[n.id].tokens) << n.id;
    EXPECT_EQ(n.prefix_tokens, n.id == "a" || n.id == "c" ? 50u : 0u) << n.id;
  }
  // Candidates by id; a key the asker may not see counts as missing.
  const std::vector<std::string> only = {"b", "nobody"};
  const auto hidden = [&](const Registry::Provenance&) { return false; };
  const auto scored = state_.Score(k, tokens, hidden, only);
  ASSERT_EQ(scored.size(), 1u);
  EXPECT_EQ(scored[0].tokens, (T{0, 0, 0, 0, 1550}));
  // No tokens given: each chunk counts 1.
  EXPECT_EQ(state_.Score(k, {}, all, only)[0].tokens, (T{0, 1, 1, 2, 2}));
}

// The acceptance's shadow model: random admits, evicts, node deaths and
// restarts, duplicated, reordered and dropped batches, and resyncs; at the
// end locate for every key equals the nodes' real inventories.
TEST_F(ClusterStateTest, LocateMatchesRealInventoriesAfterRandomChaos) {
  struct SimNode {
    std::string id;
    uint64_t incarnation = 1;
    uint64_t seq = 0;
    std::map<ChunkKey, std::set<TierKind>> truth;
    std::deque<std::pair<uint64_t, std::vector<std::pair<ChunkKey, int64_t>>>>
        wire;  // (seq, events) in flight
    bool silent = false;
  };
  std::mt19937_64 rng(2024);
  std::vector<SimNode> nodes(5);
  for (size_t i = 0; i < nodes.size(); ++i) nodes[i].id = "n" + std::to_string(i);
  auto resync = [&](SimNode& n) {
    std::vector<std::pair<ChunkKey, TierKind>> inv;
    for (auto& [k, tiers] : n.truth) {
      for (TierKind t : tiers) inv.emplace_back(k, t);
    }
    Inventory(n.id, n.incarnation, n.seq, inv);
  };
  for (auto& n : nodes) {
    ASSERT_TRUE(state_.Register(Reg(n.id, n.incarnation), now_).ok());
    resync(n);
  }
  const uint64_t key_space = 400;
  uint64_t gaps = 0, deaths = 0;
  for (int step = 0; step < 20000; ++step) {
    SimNode& n = nodes[rng() % nodes.size()];
    const int action = static_cast<int>(rng() % 100);
    if (action < 60) {  // the node's tiers change: one batch of events
      std::vector<std::pair<ChunkKey, int64_t>> batch;
      for (int e = 0; e < 1 + static_cast<int>(rng() % 4); ++e) {
        ChunkKey k = Key(rng() % key_space);
        TierKind t = rng() % 2 ? TierKind::kCpu : TierKind::kDisk;
        bool admit = rng() % 3 != 0;
        if (admit) {
          n.truth[k].insert(t);
        } else if (n.truth.count(k)) {
          n.truth[k].erase(t);
          if (n.truth[k].empty()) n.truth.erase(k);
        }
        batch.emplace_back(k, EncodeEvent(t, admit));
      }
      n.wire.emplace_back(++n.seq, std::move(batch));
    } else if (action < 90) {  // the network delivers, duplicates, reorders or drops
      if (n.wire.empty()) continue;
      const int fate = static_cast<int>(rng() % 20);
      if (fate == 0) {
        n.wire.pop_front();  // lost
        continue;
      }
      if (fate == 1 && n.wire.size() > 1) std::swap(n.wire[0], n.wire[1]);
      auto [seq, batch] = n.wire.front();
      if (fate != 2) n.wire.pop_front();  // fate 2: delivered now and again later
      auto outcome = Events(n.id, n.incarnation, seq, batch);
      if (outcome == ClusterState::Outcome::kNeedResync) {
        gaps++;
        resync(n);  // what the reporter does on kResync
      }
    } else if (action < 97) {  // heartbeats from everyone who is not silent
      now_ += 100ms;
      for (auto& m : nodes) {
        if (!m.silent) state_.Heartbeat(m.id, m.incarnation, {}, now_).IgnoreError();
      }
      state_.Tick(now_);
    } else if (action < 99) {  // a node crashes: silent until the controller declares it dead
      n.silent = true;
      now_ += 6s;
      for (auto& m : nodes) {
        if (!m.silent) state_.Heartbeat(m.id, m.incarnation, {}, now_).IgnoreError();
      }
      auto died = state_.Tick(now_).died;
      ASSERT_NE(std::find(died.begin(), died.end(), n.id), died.end());
      deaths++;
      // It restarts with a new incarnation: the CPU tier is gone, disk survives.
      for (auto it = n.truth.begin(); it != n.truth.end();) {
        it->second.erase(TierKind::kCpu);
        it = it->second.empty() ? n.truth.erase(it) : std::next(it);
      }
      n.incarnation++;
      n.seq = 0;
      n.wire.clear();
      n.silent = false;
      ASSERT_TRUE(state_.Register(Reg(n.id, n.incarnation), now_).ok());
      resync(n);
    }
    // Everyone alive keeps heartbeating often enough not to die by accident.
    if (step % 50 == 0) {
      for (auto& m : nodes) state_.Heartbeat(m.id, m.incarnation, {}, now_).IgnoreError();
    }
  }
  // Drain the wire; a lost batch left at the end shows up as a gap only if a
  // later batch arrives, so nodes finish with one more (empty) batch each.
  for (auto& n : nodes) {
    n.wire.emplace_back(++n.seq, std::vector<std::pair<ChunkKey, int64_t>>{});
    while (!n.wire.empty()) {
      auto [seq, batch] = n.wire.front();
      n.wire.pop_front();
      if (Events(n.id, n.incarnation, seq, batch) == ClusterState::Outcome::kNeedResync) resync(n);
    }
  }
  EXPECT_GT(gaps, 10u);
  EXPECT_GT(deaths, 0u);
  for (uint64_t i = 0; i < key_space; ++i) {
    std::set<std::pair<std::string, TierKind>> truth;
    for (auto& n : nodes) {
      auto it = n.truth.find(Key(i));
      if (it == n.truth.end()) continue;
      for (TierKind t : it->second) truth.insert({n.id, t});
    }
    ASSERT_EQ(Where(Key(i)), truth) << "key " << i;
  }
}

}  // namespace
}  // namespace pikv::controller
