#include "pikv/proto/control_wire.h"

#include <algorithm>

#include "pikv/common/split.h"
#include "pikv/proto/location.h"

namespace pikv {

namespace {

constexpr char kNodeId[] = "node_id", kIncarnation[] = "incarnation", kHost[] = "host",
               kTcp[] = "tcp", kIpc[] = "ipc", kCpuCapacity[] = "cpu_capacity",
               kDiskCapacity[] = "disk_capacity", kNodeIndex[] = "node_index",
               kRevokedPrefix[] = "revoked.", kSeq[] = "seq", kPart[] = "part", kFinal[] = "final",
               kWriterPrefix[] = "writer.", kChecksumPrefix[] = "checksum.", kRefused[] = "refused",
               kEngine[] = "engine", kSweepShared[] = "sweep_shared",
               kOwnerFieldPrefix[] = "owner.", kResync[] = "resync", kJson[] = "json",
               kLeader[] = "leader", kLeaderEpoch[] = "leader_epoch", kEpoch[] = "epoch",
               kElected[] = "elected", kNodes[] = "nodes";

uint64_t Count(const Fields& fields, const std::string& name) {
  return static_cast<uint64_t>(std::max<int64_t>(0, FieldInt(fields, name)));
}

// The heartbeat's counts: its field name ("{}" is a tier's name) and member.
struct TierCount {
  const char* field;
  uint64_t NodeUsage::Tier::*member;
};
constexpr TierCount kTierCounts[] = {{"{}.used_bytes", &NodeUsage::Tier::used_bytes},
                                     {"{}.capacity_bytes", &NodeUsage::Tier::capacity_bytes},
                                     {"{}.hits", &NodeUsage::Tier::hits},
                                     {"{}.misses", &NodeUsage::Tier::misses}};
struct NodeCount {
  const char* field;
  uint64_t NodeUsage::*member;
};
constexpr NodeCount kNodeCounts[] = {{"requests", &NodeUsage::requests},
                                     {"storage.hits", &NodeUsage::storage_hits},
                                     {"storage.misses", &NodeUsage::storage_misses},
                                     {"p2p.pulled_objects", &NodeUsage::pulled_objects},
                                     {"p2p.pulled_bytes", &NodeUsage::pulled_bytes},
                                     {"p2p.pull_failures", &NodeUsage::pull_failures}};

std::string TierField(const char* pattern, int tier) {
  std::string out(pattern);
  return out.replace(0, 2, TierName(static_cast<TierKind>(tier)));
}

}  // namespace

Header EncodeHeartbeat(const NodeUsage& usage) {
  Header h;
  h.type = MsgType::kHeartbeat;
  for (const NodeCount& c : kNodeCounts) h.fields[c.field] = static_cast<int64_t>(usage.*c.member);
  for (int t = 0; t < kNumTiers; ++t) {
    for (const TierCount& c : kTierCounts)
      h.fields[TierField(c.field, t)] = static_cast<int64_t>(usage.tiers[t].*c.member);
  }
  return h;
}

NodeUsage DecodeHeartbeat(const Header& h) {
  NodeUsage usage;
  for (const NodeCount& c : kNodeCounts) usage.*c.member = Count(h.fields, c.field);
  for (int t = 0; t < kNumTiers; ++t) {
    for (const TierCount& c : kTierCounts)
      usage.tiers[t].*c.member = Count(h.fields, TierField(c.field, t));
  }
  return usage;
}

Header EncodeRegister(const NodeRegistration& reg) {
  Header h;
  h.type = MsgType::kRegister;
  h.fields = {{kNodeId, reg.id},
              {kIncarnation, static_cast<int64_t>(reg.incarnation)},
              {kHost, reg.host},
              {kTcp, reg.tcp},
              {kIpc, reg.ipc},
              {kCpuCapacity, static_cast<int64_t>(reg.cpu_capacity)},
              {kDiskCapacity, static_cast<int64_t>(reg.disk_capacity)}};
  return h;
}

NodeRegistration DecodeRegister(const Header& request) {
  const Fields& f = request.fields;
  // The incarnation as every other node message reads it (an id, not a count).
  return {FieldString(f, kNodeId),
          FieldString(f, kHost),
          FieldString(f, kTcp),
          FieldString(f, kIpc),
          static_cast<uint64_t>(FieldInt(f, kIncarnation)),
          Count(f, kCpuCapacity),
          Count(f, kDiskCapacity)};
}

void EncodeRegisterReply(const RegisterReply& r, Header& reply) {
  reply.fields[kNodeIndex] = r.node_index;
  const size_t n = std::min(r.revoked.size(), kMaxRevokedInRegisterReply);
  for (size_t i = 0; i < n; ++i) reply.fields[kRevokedPrefix + std::to_string(i)] = r.revoked[i];
}

RegisterReply DecodeRegisterReply(const Header& reply) {
  RegisterReply r;
  r.node_index = FieldInt(reply.fields, kNodeIndex);
  for (size_t i = 0; i < kMaxRevokedInRegisterReply; ++i) {
    std::string engine = FieldString(reply.fields, kRevokedPrefix + std::to_string(i));
    if (engine.empty()) break;
    if (IsIdentityName(engine)) r.revoked.push_back(std::move(engine));
  }
  return r;
}

Header EncodeReport(MsgType type, NodeReport report) {
  Header h;
  h.type = type;
  h.keys = std::move(report.keys);
  h.values = std::move(report.values);
  h.fields = {{kNodeId, std::move(report.node_id)},
              {kIncarnation, static_cast<int64_t>(report.incarnation)},
              {kSeq, static_cast<int64_t>(report.seq)}};
  if (type == MsgType::kInventory) {
    h.fields[kPart] = static_cast<int64_t>(report.part);
    h.fields[kFinal] = int64_t{report.final};
  }
  for (size_t i = 0; i < report.owners.size(); ++i) {
    h.fields[kOwnerFieldPrefix + std::to_string(i + 1)] =
        report.owners[i] ? OwnerWire(*report.owners[i]) : std::string();
  }
  return h;
}

NodeReport DecodeReport(const Header& h) {
  NodeReport r{FieldString(h.fields, kNodeId),
               static_cast<uint64_t>(FieldInt(h.fields, kIncarnation)),
               static_cast<uint64_t>(FieldInt(h.fields, kSeq)),
               static_cast<uint64_t>(FieldInt(h.fields, kPart)),
               FieldInt(h.fields, kFinal) != 0,
               h.keys,
               h.values,
               {}};
  for (int slot = 1; slot <= kMaxOwnersPerReport; ++slot) {
    auto it = h.fields.find(kOwnerFieldPrefix + std::to_string(slot));
    if (it == h.fields.end()) break;
    const auto* text = std::get_if<std::string>(&it->second);
    r.owners.push_back(text ? ParseOwnerWire(*text) : std::nullopt);
  }
  return r;
}

Header EncodeMismatches(std::span<const MismatchReport> reports) {
  Header h;
  h.type = MsgType::kAuditMismatch;
  for (size_t i = 0; i < reports.size(); ++i) {
    const std::string n = std::to_string(i);
    h.keys.push_back(reports[i].key);
    h.fields[kWriterPrefix + n] = reports[i].writer;
    h.fields[kChecksumPrefix + n] = static_cast<int64_t>(reports[i].checksum);
  }
  return h;
}

std::vector<MismatchReport> DecodeMismatches(const Header& h) {
  std::vector<MismatchReport> out;
  out.reserve(h.keys.size());
  for (size_t i = 0; i < h.keys.size(); ++i) {
    const std::string n = std::to_string(i);
    out.push_back({h.keys[i], FieldString(h.fields, kWriterPrefix + n),
                   static_cast<uint64_t>(FieldInt(h.fields, kChecksumPrefix + n))});
  }
  return out;
}

void EncodeMismatchReply(const MismatchReply& r, Header& reply) {
  reply.values = {static_cast<int64_t>(r.dropped)};
  reply.fields[kRefused] = static_cast<int64_t>(r.refused);
}

Result<MismatchReply> DecodeMismatchReply(const Header& reply) {
  if (reply.values.size() != 1 || reply.values[0] < 0) return IoError("malformed mismatch reply");
  return MismatchReply{
      static_cast<uint64_t>(reply.values[0]),
      static_cast<uint64_t>(std::max<int64_t>(0, FieldInt(reply.fields, kRefused)))};
}

Header EncodeRevoke(MsgType type, const Revocation& r) {
  Header h;
  h.type = type;
  h.fields[kEngine] = r.engine;
  if (r.sweep_shared) h.fields[kSweepShared] = int64_t{1};
  return h;
}

Revocation DecodeRevoke(const Header& h) {
  return {FieldString(h.fields, kEngine), FieldInt(h.fields, kSweepShared) != 0};
}

void EncodeNodeIdentity(const NodeIdentity& id, Header& request) {
  request.fields[kNodeId] = id.node_id;
  request.fields[kIncarnation] = static_cast<int64_t>(id.incarnation);
}

NodeIdentity DecodeNodeIdentity(const Header& request) {
  return {FieldString(request.fields, kNodeId),
          static_cast<uint64_t>(FieldInt(request.fields, kIncarnation))};
}

void EncodeHeartbeatReply(const HeartbeatReply& r, Header& reply) {
  if (r.resync) reply.fields[kResync] = int64_t{1};
}

HeartbeatReply DecodeHeartbeatReply(const Header& reply) {
  return {FieldInt(reply.fields, kResync) != 0};
}

void EncodeLocate(const LocateRequest& r, Header& request) {
  request.fields[kHost] = r.host;
  if (r.json) request.fields[kJson] = int64_t{1};
}

LocateRequest DecodeLocate(const Header& request) {
  return {FieldString(request.fields, kHost), FieldInt(request.fields, kJson) != 0};
}

void EncodeScore(const ScoreRequest& r, Header& request) {
  std::string joined;
  for (const std::string& id : r.nodes) joined += (joined.empty() ? "" : ",") + id;
  if (!joined.empty()) request.fields[kNodes] = joined;
}

std::vector<std::string> ScoreCandidates(std::string_view joined) {
  std::vector<std::string> nodes;
  for (std::string_view id : SplitList(joined)) {
    if (!id.empty()) nodes.emplace_back(id);
  }
  return nodes;
}

ScoreRequest DecodeScore(const Header& request) {
  return {ScoreCandidates(FieldString(request.fields, kNodes))};
}

void EncodeAdminTarget(const AdminTarget& t, Header& request) {
  if (!t.node_id.empty()) request.fields[kNodeId] = t.node_id;
}

AdminTarget DecodeAdminTarget(const Header& request) {
  return {FieldString(request.fields, kNodeId)};
}

void EncodeNotLeader(const NotLeader& n, Header& reply) {
  reply.fields[kLeader] = n.leader;
  reply.fields[kLeaderEpoch] = n.leader_epoch;
}

NotLeader DecodeNotLeader(const Header& reply) {
  return {FieldString(reply.fields, kLeader), FieldInt(reply.fields, kLeaderEpoch)};
}

void StampEpoch(const ControllerEpoch& e, Header& h) {
  if (e.epoch) h.fields[kEpoch] = *e.epoch;
  if (e.elected_ttl_ms != 0) h.fields[kElected] = e.elected_ttl_ms;
}

ControllerEpoch EpochOf(const Header& h) {
  ControllerEpoch e;
  if (h.fields.contains(kEpoch)) e.epoch = FieldString(h.fields, kEpoch);
  e.elected_ttl_ms = FieldInt(h.fields, kElected);
  return e;
}

}  // namespace pikv
