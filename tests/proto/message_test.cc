#include "pikv/proto/message.h"

#include <gtest/gtest.h>

#include "pikv/common/units.h"
#include "pikv/proto/locate_reply.h"

namespace pikv {
namespace {

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(MessageTest, HeaderRoundTrips) {
  Header h;
  h.type = MsgType::kGet;
  h.request_id = 1ull << 40;
  h.status = ErrorCode::kCorruption;
  h.reason = "why";
  h.keys = {ChunkKey{1, 2}, ChunkKey{~0ull, 0}};
  h.values = {0, -5, INT64_MAX};
  h.fields["name"] = std::string("node-a");
  h.fields["count"] = int64_t{-42};
  auto d = DecodeHeader(Bytes(EncodeHeader(h)));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->type, MsgType::kGet);
  EXPECT_EQ(d->request_id, h.request_id);
  EXPECT_EQ(d->status, ErrorCode::kCorruption);
  EXPECT_EQ(d->reason, "why");
  EXPECT_EQ(d->keys, h.keys);
  EXPECT_EQ(d->values, h.values);
  EXPECT_EQ(d->fields, h.fields);
}

TEST(MessageTest, GarbageIsAProtocolError) {
  for (std::string junk : {std::string("\xc1"), std::string("hello"), std::string(1, '\x93'),
                           std::string("\x92\x01\x02", 3)}) {
    auto d = DecodeHeader(Bytes(junk));
    EXPECT_FALSE(d.ok());
    EXPECT_EQ(d.code(), ErrorCode::kProtocol) << d.status().ToString();
  }
  EXPECT_EQ(DecodeHeader({}).code(), ErrorCode::kProtocol);
}

TEST(MessageTest, TruncatedHeadersAreRejected) {
  Header h;
  h.keys = {ChunkKey{1, 2}};
  std::string enc = EncodeHeader(h);
  for (size_t n = 1; n < enc.size(); ++n) {
    EXPECT_FALSE(DecodeHeader(Bytes(enc.substr(0, n))).ok()) << "prefix of " << n;
  }
  EXPECT_EQ(DecodeHeader(Bytes(enc + "x")).code(), ErrorCode::kProtocol);  // trailing bytes
}

TEST(MessageTest, LimitsAreCheckedBeforeAllocation) {
  WireLimits lim;
  lim.max_batch = 4;
  Header h;
  h.keys.assign(5, ChunkKey{1, 1});
  EXPECT_EQ(DecodeHeader(Bytes(EncodeHeader(h)), lim).code(), ErrorCode::kTooLarge);
  // A header that claims a 2^32-element array must fail without reserving it.
  std::string lie = "\xdd\xff\xff\xff\xff";
  EXPECT_FALSE(DecodeHeader(Bytes(lie), lim).ok());
  lim = WireLimits{};
  lim.max_header_bytes = 8;
  EXPECT_EQ(DecodeHeader(Bytes(EncodeHeader(Header{})), lim).code(), ErrorCode::kTooLarge);
}

TEST(MessageTest, WrongVersionIsUnsupported) {
  Header h;
  h.version = kProtocolVersion + 1;
  EXPECT_EQ(DecodeHeader(Bytes(EncodeHeader(h))).code(), ErrorCode::kUnsupported);
}

TEST(MessageTest, PayloadLimits) {
  WireLimits lim;
  lim.max_payload_bytes = 100;
  lim.max_message_payload_bytes = 150;
  lim.max_batch = 3;
  std::vector<size_t> ok = {100, 50}, big = {101}, total = {100, 100}, many = {1, 1, 1, 1};
  EXPECT_TRUE(CheckPayloadLimits(ok, lim).ok());
  EXPECT_EQ(CheckPayloadLimits(big, lim).code(), ErrorCode::kTooLarge);
  EXPECT_EQ(CheckPayloadLimits(total, lim).code(), ErrorCode::kTooLarge);
  EXPECT_EQ(CheckPayloadLimits(many, lim).code(), ErrorCode::kTooLarge);
}

// The controller's encoder and every asker's decoder are one definition:
// what is written is read back, through the wire, copy for copy; a reply
// for another number of keys is refused.
TEST(LocateReplyTest, WhatTheControllerWritesIsReadBackCopyForCopy) {
  const Replica a{{3, TierKind::kCpu}, "a", "host-a", "tcp://a:1", "ipc:///a"};
  const Replica a_disk{{3, TierKind::kDisk}, "a", "host-a", "tcp://a:1", "ipc:///a"};
  const Replica b{{9, TierKind::kRemote}, "b", "host-b", "tcp://b:1", ""};
  const std::vector<std::vector<Replica>> per_key = {{a, b}, {}, {a_disk}};
  Header reply;
  LocateReplyEncoder encoder(reply);
  for (const auto& copies : per_key) encoder.AddKey(copies);
  encoder.Finish();
  const std::string wire = EncodeHeader(reply);
  auto decoded_header =
      DecodeHeader({reinterpret_cast<const uint8_t*>(wire.data()), wire.size()}, WireLimits{});
  ASSERT_TRUE(decoded_header.ok());

  auto decoded = DecodeLocateReply(*decoded_header, per_key.size());
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  ASSERT_EQ(decoded->size(), per_key.size());
  for (size_t k = 0; k < per_key.size(); ++k) {
    ASSERT_EQ((*decoded)[k].size(), per_key[k].size());
    for (size_t i = 0; i < per_key[k].size(); ++i) {
      const Replica& got = (*decoded)[k][i];
      const Replica& want = per_key[k][i];
      EXPECT_EQ(got.location, want.location);
      EXPECT_EQ(got.node_id, want.node_id);
      EXPECT_EQ(got.host, want.host);
      EXPECT_EQ(got.tcp, want.tcp);
      EXPECT_EQ(got.ipc, want.ipc);
    }
  }
  EXPECT_EQ(DecodeLocateReply(*decoded_header, 2).status().code(), ErrorCode::kProtocol);
  EXPECT_EQ(DecodeLocateReply(*decoded_header, 4).status().code(), ErrorCode::kProtocol);
}

TEST(UnitsTest, SizesAndDurations) {
  EXPECT_EQ(*ParseByteSize("64GiB"), 64ull << 30);
  EXPECT_EQ(*ParseByteSize("1.5K"), 1536u);
  EXPECT_EQ(*ParseByteSize("4096"), 4096u);
  EXPECT_EQ(*ParseByteSize("2MB"), 2000000u);
  EXPECT_FALSE(ParseByteSize("12 parsecs").ok());
  EXPECT_FALSE(ParseByteSize("GiB").ok());
  EXPECT_EQ(ParseDuration("500ms")->count(), 500);
  EXPECT_EQ(ParseDuration("2s")->count(), 2000);
  EXPECT_FALSE(ParseDuration("10").ok());
  EXPECT_FALSE(ParseDuration(std::string(90, '2') + "ms").ok()) << "too long, not undefined";
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
}

}  // namespace
}  // namespace pikv
