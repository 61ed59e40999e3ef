#include "pikv/proto/chunk_key.h"

#include <gtest/gtest.h>

namespace pikv {
namespace {

KeyNamespace Ns() {
  return {"llama-3-8b",      KvFormat::kStandard,      DType::kBF16,
          "neox;128;500000", AttentionMode::kIsolated, {}};
}

TEST(ChunkKeyTest, HexRoundTrips) {
  ChunkKey k{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  EXPECT_EQ(k.Hex(), "0123456789abcdeffedcba9876543210");
  EXPECT_EQ(ChunkKey::FromHex(k.Hex()), k);
  EXPECT_EQ(ChunkKey::FromBytes(k.Bytes().data()), k);
}

TEST(ChunkKeyTest, FromHexRejectsBadInput) {
  EXPECT_FALSE(ChunkKey::FromHex("123"));
  EXPECT_FALSE(ChunkKey::FromHex(std::string(32, 'g')));
  EXPECT_TRUE(ChunkKey::FromHex(std::string(32, 'F')));
}

TEST(ChunkKeyTest, DependsOnTokensAndNamespaceOnly) {
  std::vector<int32_t> a = {1, 2, 3}, b = {1, 2, 4};
  EXPECT_EQ(MakeChunkKey(Ns(), a), MakeChunkKey(Ns(), a));
  EXPECT_NE(MakeChunkKey(Ns(), a), MakeChunkKey(Ns(), b));
  KeyNamespace other = Ns();
  other.dtype = DType::kF16;
  EXPECT_NE(MakeChunkKey(Ns(), a), MakeChunkKey(other, a));
  other = Ns();
  other.rope_signature = "neox;128;10000";
  EXPECT_NE(MakeChunkKey(Ns(), a), MakeChunkKey(other, a));
}

TEST(ChunkKeyTest, SysKeyCountsOnlyInPrefixedMode) {
  std::vector<int32_t> t = {5, 6};
  KeyNamespace iso = Ns();
  iso.sys_key = ChunkKey{1, 2};
  EXPECT_EQ(MakeChunkKey(iso, t), MakeChunkKey(Ns(), t));
  KeyNamespace pre = Ns();
  pre.attention_mode = AttentionMode::kPrefixed;
  pre.sys_key = ChunkKey{1, 2};
  KeyNamespace pre2 = pre;
  pre2.sys_key = ChunkKey{1, 3};
  EXPECT_NE(MakeChunkKey(pre, t), MakeChunkKey(pre2, t));
}

TEST(ChunkKeyTest, NamespaceFieldsDoNotRunTogether) {
  // Length-prefixed fields: moving a character between fields changes the key.
  KeyNamespace a = Ns(), b = Ns();
  a.model_id = "ab";
  a.rope_signature = "c";
  b.model_id = "a";
  b.rope_signature = "bc";
  std::vector<int32_t> t = {1};
  EXPECT_NE(MakeChunkKey(a, t), MakeChunkKey(b, t));
}

TEST(ChunkKeyTest, TokensHashAsLittleEndianInt32) {
  // Pins the key definition: an implementation that hashes tokens any other
  // way produces different keys on the same platform family.
  std::vector<int32_t> t = {1, -1, 128000};
  ChunkKey k = MakeChunkKey(Ns(), t);
  EXPECT_EQ(k, MakeChunkKey(Ns(), std::vector<int32_t>{1, -1, 128000}));
  EXPECT_NE(k, MakeChunkKey(Ns(), std::vector<int32_t>{-1, 1, 128000}));  // order matters
}

TEST(ChunkKeyTest, APrefixAtADistanceIsItsOwnKeyButAtZeroTheSame) {
  const ChunkKey sys = MakeChunkKey(Ns(), std::vector<int32_t>{1, 2, 3});
  EXPECT_EQ(PrefixKeyAt(sys, 0), sys);  // adjacent: the key prefixed always used
  EXPECT_NE(PrefixKeyAt(sys, 1), sys);
  EXPECT_NE(PrefixKeyAt(sys, 1), PrefixKeyAt(sys, 2));
  EXPECT_EQ(PrefixKeyAt(sys, 128), PrefixKeyAt(sys, 128));
  const ChunkKey other = MakeChunkKey(Ns(), std::vector<int32_t>{1, 2, 4});
  EXPECT_NE(PrefixKeyAt(sys, 128), PrefixKeyAt(other, 128));
}

}  // namespace
}  // namespace pikv
