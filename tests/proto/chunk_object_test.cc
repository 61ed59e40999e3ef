#include "pikv/proto/chunk_object.h"

#include <gtest/gtest.h>

#include <functional>

#include "test_support.h"

namespace pikv {
namespace {

ChunkHeader SmallHeader() {
  ChunkHeader h;
  h.key = ChunkKey{7, 9};
  h.model_id = "m";
  h.geometry = {2, 3, 2, 8, DType::kF16, KvFormat::kStandard};
  h.rope_style = RopeStyle::kGptj;
  h.rotary_dim = 4;
  h.rope_offset = 2;
  h.rope_theta = 500000.0;
  h.rope_spec = "gptj;rotary_dim=4;theta=500000;scaling=llama3(8,1,4,8192)";
  h.k_form = KForm::kRotated;
  h.virtual_start = 4096;
  h.attention_mode = AttentionMode::kPrefixed;
  h.sys_key = ChunkKey{0x1234, 0x5678};
  h.tokens = {10, 20, 30};
  h.key = KeyOfContent(h);
  return h;
}

std::vector<uint8_t> Payload(const ChunkHeader& h) {
  std::vector<uint8_t> p(h.geometry.PayloadBytes());
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(i * 31 + 7);
  return p;
}

TEST(ChunkObjectTest, RoundTripsEveryHeaderField) {
  ChunkHeader h = SmallHeader();
  auto payload = Payload(h);
  auto obj = BuildChunkObject(h, payload);
  ASSERT_TRUE(obj.ok()) << obj.status().ToString();
  auto parsed = ParseChunkHeader(*obj);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->key, h.key);
  EXPECT_EQ(parsed->model_id, "m");
  EXPECT_EQ(parsed->geometry.num_layers, 2u);
  EXPECT_EQ(parsed->geometry.num_tokens, 3u);
  EXPECT_EQ(parsed->geometry.num_kv_heads, 2u);
  EXPECT_EQ(parsed->geometry.head_dim, 8u);
  EXPECT_EQ(parsed->geometry.dtype, DType::kF16);
  EXPECT_EQ(parsed->rope_style, RopeStyle::kGptj);
  EXPECT_EQ(parsed->rotary_dim, 4u);
  EXPECT_EQ(parsed->rope_offset, 2u);
  EXPECT_EQ(parsed->rope_theta, 500000.0);
  EXPECT_EQ(parsed->rope_spec, h.rope_spec);
  EXPECT_EQ(parsed->k_form, KForm::kRotated);
  EXPECT_EQ(parsed->virtual_start, 4096);
  EXPECT_EQ(parsed->attention_mode, AttentionMode::kPrefixed);
  EXPECT_EQ(parsed->sys_key, h.sys_key);
  EXPECT_EQ(parsed->tokens, h.tokens);
  EXPECT_EQ(parsed->header_size % 64, 0u);
  auto body = ChunkPayload(*obj, *parsed);
  EXPECT_TRUE(std::equal(body.begin(), body.end(), payload.begin(), payload.end()));
  EXPECT_TRUE(VerifyChunkObject(*obj, &h.key).ok());
}

TEST(ChunkObjectTest, AnUnsealedObjectFailsVerificationUntilSealedThenMatchesABuiltOne) {
  ChunkHeader h = SmallHeader();
  auto payload = Payload(h);
  auto built = BuildChunkObject(h, payload);
  ASSERT_TRUE(built.ok());
  std::vector<uint8_t> unsealed(built->size());
  ASSERT_TRUE(BuildChunkObjectInto(h, payload, unsealed, /*checksum=*/false).ok());
  EXPECT_EQ(VerifyChunkObject(unsealed, &h.key).code(), ErrorCode::kCorruption);
  auto digest = SealChunkObject(unsealed);
  ASSERT_TRUE(digest.ok()) << digest.status().ToString();
  EXPECT_EQ(*digest, PayloadChecksum(ChunkPayload(*built, *ParseChunkHeader(*built))));
  EXPECT_EQ(unsealed, *built);
  EXPECT_TRUE(VerifyChunkObject(unsealed, &h.key).ok());
  // A header that does not parse cannot be sealed.
  unsealed[20] ^= 1;
  EXPECT_FALSE(SealChunkObject(unsealed).ok());
}

TEST(ChunkObjectTest, AnUnsealedBuildMarksItsBytesWrittenAndSealsWithAChecksumGiven) {
  ChunkHeader h = SmallHeader();
  auto payload = Payload(h);
  auto built = BuildChunkObject(h, payload);
  ASSERT_TRUE(built.ok());
  std::vector<uint8_t> unsealed(built->size());
  StreamingPayloadChecksum followed;  // what a node hashing behind the marks sees
  std::vector<size_t> marks;
  auto written = [&](size_t n) {
    followed.Append({unsealed.data() + followed.appended(), n - followed.appended()});
    marks.push_back(n);
  };
  ASSERT_TRUE(BuildChunkObjectInto(h, payload, unsealed, /*checksum=*/false, written).ok());
  EXPECT_EQ(marks, std::vector<size_t>{unsealed.size()});
  const uint64_t digest = PayloadChecksum(ChunkPayload(*built, *ParseChunkHeader(*built)));
  EXPECT_EQ(followed.Digest(), digest);
  std::vector<uint8_t> copy = unsealed;
  ASSERT_TRUE(SealChunkObject(unsealed, {}, followed.Digest()).ok());
  EXPECT_EQ(unsealed, *built);
  // The checksum given is the one written: a wrong one makes a corrupt object.
  ASSERT_TRUE(SealChunkObject(copy, {}, digest ^ 1).ok());
  EXPECT_EQ(VerifyChunkObject(copy, &h.key).code(), ErrorCode::kCorruption);
}

// CopyIn copies tile by tile and hashes what it copied: the same bytes and
// the same digest as a copy and then Append, across tile edges and an
// object whose header ends inside the first tile.
TEST(ChunkObjectTest, CopyInCopiesAndHashesAsAppendDoes) {
  ChunkHeader h = SmallHeader();
  h.geometry = {9, 37, 8, 128, DType::kF16, KvFormat::kStandard};  // 1.3 MiB: two tiles
  h.tokens.resize(37, 5);
  h.key = KeyOfContent(h);
  auto built = BuildChunkObject(h, Payload(h));
  ASSERT_TRUE(built.ok());
  ASSERT_GT(built->size(), (size_t{1} << 20) + 3);
  for (size_t split : {size_t{0}, size_t{10}, size_t{65536 + 3}, (size_t{1} << 20) + 3}) {
    std::vector<uint8_t> copy(built->size());
    StreamingPayloadChecksum copied;
    copied.CopyIn(copy.data(), std::span<const uint8_t>(*built).first(split));
    copied.CopyIn(copy.data() + split, std::span<const uint8_t>(*built).subspan(split));
    EXPECT_EQ(copy, *built) << split;
    EXPECT_EQ(copied.Digest(), PayloadChecksum(ChunkPayload(*built, *ParseChunkHeader(*built))))
        << split;
    EXPECT_TRUE(VerifyChunkObject(copy, &h.key, {}, copied.Digest()).ok()) << split;
  }
}

// The key is the address and a claim about the content: an object whose
// namespace or tokens do not hash to its key is refused, whatever it says.
TEST(ChunkObjectTest, AnObjectWhoseKeyIsNotItsOwnContentsFailsVerification) {
  const ChunkHeader honest = SmallHeader();
  const std::vector<std::function<void(ChunkHeader&)>> poisons = {
      [](ChunkHeader& h) { h.tokens[1] = 21; },
      [](ChunkHeader& h) { h.model_id = "other-model"; },
      [](ChunkHeader& h) { h.geometry.dtype = DType::kBF16; },
      [](ChunkHeader& h) { h.rope_spec = "gptj;rotary_dim=4;theta=10000"; },
      [](ChunkHeader& h) {
        h.sys_key = ChunkKey{1, 1};
      },
      [](ChunkHeader& h) {
        h.attention_mode = AttentionMode::kIsolated;
        h.sys_key.reset();
      },
  };
  for (size_t i = 0; i < poisons.size(); ++i) {
    ChunkHeader h = honest;
    poisons[i](h);  // the key stays the honest one
    auto obj = BuildChunkObject(h, Payload(h));
    ASSERT_TRUE(obj.ok()) << i;
    EXPECT_TRUE(VerifyChunkObject(*obj).ok()) << i;  // well formed...
    EXPECT_EQ(VerifyChunkObject(*obj, &honest.key).code(), ErrorCode::kCorruption) << i;
  }
  auto obj = BuildChunkObject(honest, Payload(honest));
  ASSERT_TRUE(obj.ok());
  EXPECT_TRUE(VerifyChunkObject(*obj, &honest.key).ok());
  // A system prompt key on an isolated chunk does not even build.
  ChunkHeader h = honest;
  h.attention_mode = AttentionMode::kIsolated;
  EXPECT_FALSE(BuildChunkObject(h, Payload(h)).ok());
}

TEST(ChunkObjectTest, MlaHasOnePlanePerLayer) {
  ChunkHeader h = SmallHeader();
  h.geometry = {2, 3, 1, 576, DType::kBF16, KvFormat::kMla};
  h.rotary_dim = 64;
  h.rope_offset = 512;
  EXPECT_EQ(h.geometry.PayloadBytes(), 2u * 3 * 576 * 2);
  EXPECT_TRUE(BuildChunkObject(h, Payload(h)).ok());
}

TEST(ChunkObjectTest, BuildRejectsInconsistentInput) {
  ChunkHeader h = SmallHeader();
  auto payload = Payload(h);
  payload.pop_back();
  EXPECT_EQ(BuildChunkObject(h, payload).code(), ErrorCode::kInvalidArgument);
  h = SmallHeader();
  h.tokens.pop_back();
  EXPECT_EQ(BuildChunkObject(h, Payload(h)).code(), ErrorCode::kInvalidArgument);
  h = SmallHeader();
  h.rotary_dim = 8;  // offset 2 + 8 > head_dim 8
  EXPECT_EQ(BuildChunkObject(h, Payload(h)).code(), ErrorCode::kInvalidArgument);
}

TEST(ChunkObjectTest, EveryFlippedByteIsDetected) {
  ChunkHeader h = SmallHeader();
  auto obj = *BuildChunkObject(h, Payload(h));
  for (size_t i = 0; i < obj.size(); ++i) {
    auto bad = obj;
    bad[i] ^= 0x40;
    EXPECT_FALSE(VerifyChunkObject(bad, &h.key).ok()) << "flip at byte " << i << " went unnoticed";
  }
}

TEST(ChunkObjectTest, TruncatedOrExtendedObjectsAreCorrupt) {
  ChunkHeader h = SmallHeader();
  auto obj = *BuildChunkObject(h, Payload(h));
  for (size_t len : {size_t{0}, size_t{10}, size_t{64}, obj.size() - 1}) {
    std::span<const uint8_t> cut(obj.data(), len);
    EXPECT_EQ(VerifyChunkObject(cut).code(), ErrorCode::kCorruption) << "length " << len;
  }
  auto longer = obj;
  longer.push_back(0);
  EXPECT_EQ(VerifyChunkObject(longer).code(), ErrorCode::kCorruption);
}

TEST(ChunkObjectTest, KeyMismatchIsCorruption) {
  ChunkHeader h = SmallHeader();
  auto obj = *BuildChunkObject(h, Payload(h));
  ChunkKey other{1, 1};
  EXPECT_EQ(VerifyChunkObject(obj, &other).code(), ErrorCode::kCorruption);
}

TEST(ChunkObjectTest, LimitsApplyBeforeSizing) {
  ChunkHeader h = SmallHeader();
  auto obj = *BuildChunkObject(h, Payload(h));
  ChunkLimits tight;
  tight.max_tokens = 2;
  EXPECT_EQ(ParseChunkHeader(obj, tight).code(), ErrorCode::kCorruption);
}

TEST(ChunkObjectTest, TestObjectsHitTheirTargetSize) {
  for (size_t target : {size_t{1} << 10, size_t{1} << 20, size_t{32} << 20}) {
    auto o = testing::MakeObject(3, target);
    EXPECT_GE(o.bytes.size(), target);
    EXPECT_LE(o.bytes.size(), target + 4096);
    EXPECT_TRUE(VerifyChunkObject(o.bytes.span(), &o.key).ok());
  }
}

}  // namespace
}  // namespace pikv

namespace pikv {
namespace {

// Format 3: the tenant is in the header and the key's namespace; the writer
// sits in a fixed field a node stamps in place, resealing the header.
TEST(ChunkOwnerTest, TenantIsInTheKeyAndTheWriterIsStampedInPlace) {
  auto o = testing::MakeObject(7, 4096);
  auto h = *ParseChunkHeader(o.bytes.span());
  EXPECT_EQ(h.tenant, "");
  EXPECT_EQ(ReadOwner(o.bytes.span()), (Owner{"", std::string(kUnknownWriter)}));
  KeyNamespace ns = NamespaceOf(h);
  const ChunkKey default_key = MakeChunkKey(ns, h.tokens);
  ns.tenant = "acme";
  EXPECT_NE(MakeChunkKey(ns, h.tokens), default_key);
  EXPECT_EQ(default_key, h.key);  // the default tenant adds nothing to the namespace

  std::vector<uint8_t> bytes(o.bytes.data(), o.bytes.data() + o.bytes.size());
  ASSERT_TRUE(StampWriter(bytes, "vllm-a").ok());
  EXPECT_TRUE(VerifyChunkObject(bytes, &o.key).ok());
  EXPECT_EQ(ReadOwner(bytes)->writer, "vllm-a");
  EXPECT_EQ(ParseChunkHeader(bytes)->writer, "vllm-a");
  EXPECT_EQ(StampWriter(bytes, "bad name").code(), ErrorCode::kInvalidArgument);
  bytes[200] ^= 1;  // inside the tenant field: the header no longer holds
  EXPECT_EQ(StampWriter(bytes, "x").code(), ErrorCode::kCorruption);
  bytes[200] ^= 1;
  bytes[8] = 2;  // an object of format 2 reads as nothing
  EXPECT_EQ(ParseChunkHeader(bytes).code(), ErrorCode::kUnsupported);
  EXPECT_EQ(ReadOwner(bytes), std::nullopt);
}

// Format 4: a scope (a request's sub-namespace: vLLM's cache salt) is part
// of the key and travels in the header, so a node recomputing the key from
// the header gets the scoped key, and an object of format 3 reads as nothing.
TEST(ChunkOwnerTest, TheScopeIsInTheKeyAndTheHeader) {
  ChunkHeader h = SmallHeader();
  const ChunkKey unscoped = h.key;
  h.scope = ChunkKey{0xabc, 0xdef};
  h.key = KeyOfContent(h);
  EXPECT_NE(h.key, unscoped);
  KeyNamespace other = NamespaceOf(h);
  other.scope = ChunkKey{0xabc, 0xdee};
  EXPECT_NE(MakeChunkKey(other, h.tokens), h.key);
  auto payload = Payload(h);
  auto obj = BuildChunkObject(h, payload);
  ASSERT_TRUE(obj.ok()) << obj.status().ToString();
  auto parsed = ParseChunkHeader(*obj);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->scope, h.scope);
  EXPECT_TRUE(VerifyChunkObject(*obj, &h.key).ok());
  // Another scope's object filed under this key: the key is not the hash
  // of that object's own namespace, and a node refuses it.
  ChunkHeader forged = h;
  forged.scope = ChunkKey{0xabc, 0xdee};
  auto forged_obj = BuildChunkObject(forged, payload);
  ASSERT_TRUE(forged_obj.ok());
  EXPECT_EQ(VerifyChunkObject(*forged_obj, &h.key).code(), ErrorCode::kCorruption);
  std::vector<uint8_t> bytes = *obj;
  bytes[8] = 3;
  EXPECT_EQ(ParseChunkHeader(bytes).code(), ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace pikv
