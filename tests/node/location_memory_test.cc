// LocationMemory: what the controller last said, bounded, and the peers it
// named most recently.
#include "pikv/node/location_memory.h"

#include <gtest/gtest.h>

namespace pikv::node {
namespace {

ChunkKey Key(uint64_t i) { return ChunkKey{i, i * 7 + 1}; }

Replica Copy(const std::string& node, TierKind tier = TierKind::kCpu) {
  Replica c;
  c.node_id = node;
  c.location.tier = tier;
  c.tcp = "tcp://" + node + ":1";
  return c;
}

std::vector<std::string> Nodes(const std::vector<Replica>& copies) {
  std::vector<std::string> out;
  for (const auto& c : copies) out.push_back(c.node_id);
  return out;
}

// A pull's planned peer is dialled only at an endpoint the controller named
// (NodeAt); never one a request names alone, never the remote tier's.
TEST(LocationMemory, KnowsTheNodeAtAnEndpointOnlyFromTheControllersAnswers) {
  LocationMemory memory;
  EXPECT_EQ(memory.NodeAt("tcp://a:1"), "");
  memory.Remember(std::vector<ChunkKey>{Key(1)}, {{Copy("a"), Copy("r", TierKind::kRemote)}});
  EXPECT_EQ(memory.NodeAt("tcp://a:1"), "a");
  EXPECT_EQ(memory.NodeAt("tcp://r:1"), "");
  EXPECT_EQ(memory.NodeAt("tcp://elsewhere:1"), "");
  // A node named at that endpoint since (a restart under another id) is the one.
  Replica moved = Copy("a2");
  moved.tcp = "tcp://a:1";
  memory.Remember(std::vector<ChunkKey>{Key(2)}, {{moved}});
  EXPECT_EQ(memory.NodeAt("tcp://a:1"), "a2");
}

TEST(LocationMemory, RecallsWhatWasLocatedAndOtherwiseTheNewestPeers) {
  LocationMemory memory;
  EXPECT_TRUE(memory.Recall(std::vector<ChunkKey>{Key(1)})[0].empty());  // nothing seen yet
  const std::vector<ChunkKey> keys = {Key(1), Key(2)};
  memory.Remember(keys, {{Copy("a"), Copy("r", TierKind::kRemote)}, {Copy("b"), Copy("c")}});
  auto recalled = memory.Recall(std::vector<ChunkKey>{Key(1), Key(2), Key(3)});
  EXPECT_EQ(Nodes(recalled[0]), (std::vector<std::string>{"a"}));  // never the remote tier
  EXPECT_EQ(Nodes(recalled[1]), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(Nodes(recalled[2]), (std::vector<std::string>{"c", "b", "a"}));  // newest first
  // An answer naming no copy (a registry being rebuilt) keeps what was seen.
  memory.Remember(std::vector<ChunkKey>{Key(2)}, {{}});
  EXPECT_EQ(memory.size(), 2u);
  EXPECT_EQ(Nodes(memory.Recall(std::vector<ChunkKey>{Key(2)})[0]),
            (std::vector<std::string>{"b", "c"}));
  // Peers stay distinct and at most kMaxPeers.
  for (const char* n : {"d", "e", "f", "a", "g"})
    memory.Remember(std::vector<ChunkKey>{Key(9)}, {{Copy(n)}});
  EXPECT_EQ(Nodes(memory.Recall(std::vector<ChunkKey>{Key(3)})[0]),
            (std::vector<std::string>{"g", "a", "f", "e"}));
}

TEST(LocationMemory, KeepsAtMostItsBoundDroppingTheOldest) {
  LocationMemory memory(3);
  for (uint64_t i = 1; i <= 5; ++i) memory.Remember(std::vector<ChunkKey>{Key(i)}, {{Copy("a")}});
  EXPECT_EQ(memory.size(), 3u);
  memory.Remember(std::vector<ChunkKey>{Key(3)}, {{Copy("b")}});  // renewed: now the newest
  memory.Remember(std::vector<ChunkKey>{Key(6)}, {{Copy("a")}});  // drops 4, the oldest
  auto r = memory.Recall(std::vector<ChunkKey>{Key(3), Key(4), Key(5), Key(6)});
  EXPECT_EQ(Nodes(r[0]), (std::vector<std::string>{"b"}));
  EXPECT_EQ(Nodes(r[1]), (std::vector<std::string>{"a", "b"}));  // forgotten: the peers
  EXPECT_EQ(Nodes(r[2]), (std::vector<std::string>{"a"}));
  EXPECT_EQ(memory.size(), 3u);
}

}  // namespace
}  // namespace pikv::node
