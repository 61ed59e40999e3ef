#include "pikv/proto/message.h"

#include <gtest/gtest.h>

#include "pikv/common/units.h"
#include "pikv/proto/control_wire.h"
#include "pikv/proto/data_wire.h"
#include "pikv/proto/locate_reply.h"
#include "pikv/proto/location.h"
#include "pikv/proto/share_wire.h"

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

TEST(ControlWireTest, ARegistrationIsReadBackAsSent) {
  const NodeRegistration reg{"node-a", "host-a",  "tcp://10.0.0.1:7400", "ipc:///run/a", 42,
                             1 << 30,  5ull << 40};
  const std::string bytes = EncodeHeader(EncodeRegister(reg));
  auto h = DecodeHeader({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->type, MsgType::kRegister);
  EXPECT_EQ(DecodeRegister(*h), reg);
  // What a hostile sender sets: negative capacities read as none.
  h->fields["cpu_capacity"] = int64_t{-5};
  EXPECT_EQ(DecodeRegister(*h).cpu_capacity, 0u);
}

TEST(ControlWireTest, ARegisterReplyKeepsOnlyEngineNamesUpToItsLimit) {
  RegisterReply sent{7, {"good", "bad name", "also-good"}};
  for (size_t i = 0; i < kMaxRevokedInRegisterReply; ++i)
    sent.revoked.push_back("e" + std::to_string(i));
  Header reply;
  EncodeRegisterReply(sent, reply);
  const RegisterReply got = DecodeRegisterReply(reply);
  EXPECT_EQ(got.node_index, 7);
  ASSERT_EQ(got.revoked.size(), kMaxRevokedInRegisterReply - 1);  // the bad name dropped
  EXPECT_EQ(got.revoked[0], "good");
  EXPECT_EQ(got.revoked[1], "also-good");
  EXPECT_EQ(DecodeRegisterReply(Header{}), RegisterReply{});
}

// Every declared control message is read back as it was sent, through the
// bytes on the wire.
Header ThroughTheWire(const Header& h) {
  const std::string bytes = EncodeHeader(h);
  auto back = DecodeHeader({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
  EXPECT_TRUE(back.ok()) << back.status().ToString();
  return back.ok() ? *back : Header{};
}

TEST(ControlWireTest, AReportKeepsItsOwnerTableSlotForSlot) {
  const ChunkKey a{1, 2}, b{3, 4};
  NodeReport sent{"node-a",
                  9,
                  17,
                  2,
                  true,
                  {a, b},
                  {EncodeHeld(TierKind::kCpu, 1), EncodeHeld(TierKind::kDisk, 2)}};
  sent.owners = {Owner{"t1", "w1"}, Owner{"", "w2"}};
  const NodeReport got = DecodeReport(ThroughTheWire(EncodeReport(MsgType::kInventory, sent)));
  EXPECT_EQ(got.node_id, "node-a");
  EXPECT_EQ(got.incarnation, 9u);
  EXPECT_EQ(got.seq, 17u);
  EXPECT_EQ(got.part, 2u);
  EXPECT_TRUE(got.final);
  EXPECT_EQ(got.keys, sent.keys);
  EXPECT_EQ(got.values, sent.values);
  ASSERT_EQ(got.owners.size(), 2u);
  EXPECT_EQ(got.owners[1]->writer, "w2");
  // An event report says no part; a table entry that is not an owner reads
  // as one not known, and the table ends at the first slot missing.
  Header events = EncodeReport(MsgType::kEvents, sent);
  EXPECT_EQ(events.fields.count("part"), 0u);
  events.fields["owner.1"] = std::string("not an owner");
  events.fields["owner.4"] = OwnerWire(Owner{"t", "w"});
  const NodeReport odd = DecodeReport(ThroughTheWire(events));
  ASSERT_EQ(odd.owners.size(), 2u);
  EXPECT_FALSE(odd.owners[0]);
  EXPECT_TRUE(odd.owners[1]);
}

TEST(DataWireTest, APullIsReadBackAsSentInTheFieldsItAlwaysHad) {
  const PullRequest sent{"tcp://10.0.0.2:7400", 250, true};
  Header h;
  h.type = MsgType::kPull;
  EncodePull(sent, h);
  EXPECT_EQ(DecodePull(ThroughTheWire(h)), sent);
  // The wire's fields, as nodes of either version read them.
  EXPECT_EQ(h.fields, (Fields{{"from", std::string("tcp://10.0.0.2:7400")},
                              {"timeout_ms", int64_t{250}},
                              {"admit_only", int64_t{1}}}));
  // Nothing set: the node's default deadline, a plain pull.
  EXPECT_EQ(DecodePull(Header{}), PullRequest{});
  Header odd;
  odd.fields["timeout_ms"] = std::string("soon");
  EXPECT_FALSE(DecodePull(odd).timeout_ms);
  odd.fields["timeout_ms"] = int64_t{-5};  // kept: the node clamps it
  EXPECT_EQ(DecodePull(odd).timeout_ms, -5);
}

// A declared message written into a header: read back through the wire as
// sent, and in exactly the fields peers of either version read.
template <typename T, typename Encode, typename Decode>
void ReadBackInItsFields(const T& sent, Encode encode, Decode decode, const Fields& fields) {
  Header h;
  encode(sent, h);
  EXPECT_EQ(h.fields, fields);
  EXPECT_TRUE(decode(ThroughTheWire(h)) == sent);
}

TEST(DataWireTest, EachFieldMessageIsReadBackAsSentInTheFieldsItAlwaysHad) {
  ReadBackInItsFields(StreamedPut{64 << 10, 5 << 20}, EncodeStreamedPut, DecodeStreamedPut,
                      {{"stream_frame", int64_t{64 << 10}}, {"stream_size", int64_t{5 << 20}}});
  ReadBackInItsFields(int64_t{1 << 20}, SetStreamFrame, StreamFrameOf,
                      {{"stream_frame", int64_t{1 << 20}}});
  EXPECT_FALSE(HasStreamFrame(Header{}));
  ReadBackInItsFields(std::string("node-a"), SetAnsweringNode, AnsweringNode,
                      {{"node_id", std::string("node-a")}});
  ReadBackInItsFields(ShareHello{1 << 30, true},
                      [](const ShareHello& hello, Header& h) { h = EncodeShareHello(hello); },
                      DecodeShareHello,
                      {{"arena_bytes", int64_t{1 << 30}}, {"seal_ahead", int64_t{1}}});
  ReadBackInItsFields(LoanTerms{9, 30000}, EncodeLoanTerms, DecodeLoanTerms,
                      {{"lease", int64_t{9}}, {"ttl_ms", int64_t{30000}}});
  ReadBackInItsFields(LoanTerms{.ttl_ms = 30000}, EncodeLoanTerms, DecodeLoanTerms,
                      {{"ttl_ms", int64_t{30000}}});  // a reservation's: no lease id
  ReadBackInItsFields(CommitRequest{true}, EncodeCommit, DecodeCommit, {{"seal", int64_t{1}}});
  ReadBackInItsFields(CommitRequest{false}, EncodeCommit, DecodeCommit, {});
  // What a hostile node may send: a negative lease id is no loan.
  Header odd;
  odd.fields["lease"] = int64_t{-3};
  EXPECT_EQ(DecodeLoanTerms(odd).lease, 0);
}

TEST(ControlWireTest, EachFieldMessageIsReadBackAsSentInTheFieldsItAlwaysHad) {
  ReadBackInItsFields(NodeIdentity{"node-a", 42}, EncodeNodeIdentity, DecodeNodeIdentity,
                      {{"node_id", std::string("node-a")}, {"incarnation", int64_t{42}}});
  ReadBackInItsFields(HeartbeatReply{true}, EncodeHeartbeatReply, DecodeHeartbeatReply,
                      {{"resync", int64_t{1}}});
  ReadBackInItsFields(HeartbeatReply{false}, EncodeHeartbeatReply, DecodeHeartbeatReply, {});
  ReadBackInItsFields(LocateRequest{"host-a", true}, EncodeLocate, DecodeLocate,
                      {{"host", std::string("host-a")}, {"json", int64_t{1}}});
  ReadBackInItsFields(AdminTarget{"node-b"}, EncodeAdminTarget, DecodeAdminTarget,
                      {{"node_id", std::string("node-b")}});
  ReadBackInItsFields(AdminTarget{}, EncodeAdminTarget, DecodeAdminTarget, {});  // every node
  ReadBackInItsFields(
      NotLeader{"tcp://10.0.0.9:7300", 12}, EncodeNotLeader, DecodeNotLeader,
      {{"leader", std::string("tcp://10.0.0.9:7300")}, {"leader_epoch", int64_t{12}}});
  ReadBackInItsFields(ControllerEpoch{"17", 3000}, StampEpoch, EpochOf,
                      {{"epoch", std::string("17")}, {"elected", int64_t{3000}}});
  ReadBackInItsFields(ControllerEpoch{"17", 0}, StampEpoch, EpochOf,
                      {{"epoch", std::string("17")}});  // alone: not elected
  ReadBackInItsFields(ControllerEpoch{}, StampEpoch, EpochOf, {});
  ReadBackInItsFields(true, [](bool, Header& h) { MarkRegistryFilling(h); }, RegistryFilling,
                      {{"filling", int64_t{1}}});
  EXPECT_FALSE(RegistryFilling(Header{}));
}

TEST(ControlWireTest, AHeartbeatsUsageIsReadBackAsSent) {
  NodeUsage sent{.requests = 7,
                 .storage_hits = 5,
                 .storage_misses = 2,
                 .pulled_objects = 3,
                 .pulled_bytes = 3 << 20,
                 .pull_failures = 1};
  sent.tiers[0] = {1 << 20, 1 << 30, 4, 1};
  sent.tiers[2] = {9ull << 40, 0, 1, 1};
  const Header h = ThroughTheWire(EncodeHeartbeat(sent));
  EXPECT_EQ(h.type, MsgType::kHeartbeat);
  EXPECT_EQ(DecodeHeartbeat(h), sent);
  // What a hostile or older sender sets: a negative count reads as 0, a
  // missing one too, a field not known is ignored.
  Header odd = h;
  odd.fields["cpu.used_bytes"] = int64_t{-1};
  odd.fields.erase("requests");
  odd.fields["cpu.hits"] = std::string("many");
  odd.fields["zero_copy.leases"] = int64_t{3};
  const NodeUsage got = DecodeHeartbeat(odd);
  EXPECT_EQ(got.tiers[0].used_bytes, 0u);
  EXPECT_EQ(got.tiers[0].hits, 0u);
  EXPECT_EQ(got.requests, 0u);
  EXPECT_EQ(got.tiers[2], sent.tiers[2]);
}

TEST(ControlWireTest, MismatchesAndRevocationsAreReadBackAsSent) {
  const std::vector<MismatchReport> sent = {{{1, 2}, "w1", 0xfedcba9876543210ull},
                                            {{3, 4}, "w2", 7}};
  EXPECT_EQ(DecodeMismatches(ThroughTheWire(EncodeMismatches(sent))), sent);
  Header reply;
  EncodeMismatchReply({3, 1}, reply);
  auto back = DecodeMismatchReply(ThroughTheWire(reply));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->dropped, 3u);
  EXPECT_EQ(back->refused, 1u);
  reply.values = {-1};
  EXPECT_FALSE(DecodeMismatchReply(reply).ok());
  EXPECT_FALSE(DecodeMismatchReply(Header{}).ok());
  for (const Revocation& r : {Revocation{"bad", false}, Revocation{"bad", true}}) {
    const Header h = ThroughTheWire(EncodeRevoke(MsgType::kRevoke, r));
    EXPECT_EQ(h.type, MsgType::kRevoke);
    EXPECT_EQ(DecodeRevoke(h), r);
  }
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
