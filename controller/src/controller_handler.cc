#include "pikv/controller/controller_handler.h"

#include <spdlog/spdlog.h>

#include "pikv/controller/views.h"
#include "pikv/proto/admin_wire.h"
#include "pikv/proto/control_wire.h"
#include "pikv/proto/locate_reply.h"
#include "pikv/proto/owner.h"
#include "pikv/proto/permissions.h"

namespace pikv::controller {

namespace {

// A ROUTER identity (binary) as hex, for logs and counters.
std::string HexOf(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : bytes) hex += {kDigits[c >> 4], kDigits[c & 15]};
  return hex;
}

}  // namespace

std::vector<ControllerHandler::Outgoing> ControllerHandler::Reject(const std::string& identity,
                                                                   const Header* req,
                                                                   const Status& why) {
  counters_.Add(stats::HandlerCounter::kRejected);
  Header h;
  if (req) {
    h = ReplyTo(*req, why.code(), why.message());
  } else {
    h.type = MsgType::kError;
    h.status = why.code();
    h.reason = why.message();
  }
  spdlog::debug("controller: rejected a request: {}", why.ToString());
  return {{identity, std::move(h), {}}};
}

std::vector<ControllerHandler::Outgoing> ControllerHandler::Handle(const std::string& identity,
                                                                   const CurvePeer* sender,
                                                                   std::span<const uint8_t> header,
                                                                   size_t payload_frames,
                                                                   Clock::time_point now) {
  auto decoded = DecodeHeader(header, limits_);
  if (!decoded.ok()) return Reject(identity, nullptr, decoded.status());
  const Header& h = *decoded;
  if (Status allowed = Authorize(Server::kController, sender, h); !allowed.ok()) {
    spdlog::warn("controller: refused {} from {}: {}", MsgTypeName(h.type),
                 sender ? sender->UserId() : "a trusted peer", allowed.message());
    return Reject(identity, &h, allowed);
  }
  if (IsRevoked(sender, revoked_.get())) {
    spdlog::warn("controller: refused {} from revoked engine {}", MsgTypeName(h.type),
                 sender->name);
    return Reject(identity, &h, PermissionDenied("engine " + sender->name + " is revoked"));
  }
  if (payload_frames > 0)
    return Reject(identity, &h, InvalidArgument("the controller takes no payload frames"));
  // The lease is checked on the clock of this message, not of the batch it
  // came in: a process stalled mid-batch must not answer as leader after.
  if (!Leading(Clock::now())) return {{identity, NotLeader(h, now), {}}};
  std::vector<Outgoing> out;
  Apply(identity, sender, h, now, out);
  return out;
}

bool ControllerHandler::StillLeading() const {
  const LeaderElection* election = election_.load();
  if (!election) return true;
  const int64_t epoch = election->LeaderEpoch(Clock::now());
  return epoch != 0 && static_cast<uint64_t>(epoch) == state_.epoch();
}

bool ControllerHandler::Leading(Clock::time_point now) {
  const LeaderElection* election = election_.load();
  if (!election) return ReadTrust(state_.epoch(), now);  // alone: its trust file, once
  const int64_t epoch = election->LeaderEpoch(now);
  if (epoch == 0) {
    if (state_.epoch() != 0) {
      spdlog::warn("controller: standing by; the registry of epoch {} is dropped", state_.epoch());
      state_.Reset(0);
      identities_.clear();
      counters_.Add(stats::HandlerCounter::kStepDowns);
    }
    return false;
  }
  if (static_cast<uint64_t>(epoch) != state_.epoch()) {
    // A new leadership starts empty: the nodes see the new epoch, register
    // and send their inventories, as after a restart.
    spdlog::info("controller: leading at epoch {}; the nodes report afresh", epoch);
    state_.Reset(static_cast<uint64_t>(epoch));
    identities_.clear();
    counters_.Add(stats::HandlerCounter::kLeaderships);
  }
  return ReadTrust(static_cast<uint64_t>(epoch), now);
}

bool ControllerHandler::ReadTrust(uint64_t epoch, Clock::time_point now) {
  if (!trust_ || trust_epoch_ == epoch) return true;
  if (now < trust_retry_at_) return false;
  auto record = trust_->Load();
  if (!record.ok()) {
    // Answering without the revocations would let a revoked engine in.
    spdlog::error("controller: the trust record in {} cannot be read ({}): not answering yet",
                  trust_->where(), record.status().ToString());
    trust_retry_at_ = now + std::chrono::milliseconds(500);
    return false;
  }
  for (const std::string& engine : record->revoked) revoked_->Add(engine);
  state_.audits().RestoreConfirmed(record->confirmed);
  trust_epoch_ = epoch;
  spdlog::info(
      "controller: trust record read: {} revoked engines, {} writers with confirmed "
      "poisonings",
      record->revoked.size(), record->confirmed.size());
  return true;
}

Header ControllerHandler::NotLeader(const Header& request, Clock::time_point now) const {
  const LeaderElection* election = election_.load();
  if (!election)  // alone, and its trust file could not be read (logged)
    return ReplyTo(request, ErrorCode::kUnavailable,
                   "the controller cannot read its trust record (" + trust_->where() +
                       "): not answering until it can");
  const ElectionView view = election->View(now);
  Header reply =
      ReplyTo(request, ErrorCode::kNotLeader,
              view.current.endpoint.empty() ? "no leader elected yet"
                                            : "not the leader: " + view.current.endpoint);
  EncodeNotLeader({view.current.endpoint, view.current.epoch}, reply);
  return reply;
}

void ControllerHandler::Stamp(Header& h) const {
  const LeaderElection* e = election_.load();
  StampEpoch(
      {std::to_string(state_.epoch()), e ? static_cast<int64_t>(e->options().ttl.count()) : 0}, h);
}

void ControllerHandler::Apply(const std::string& identity, const CurvePeer* sender, const Header& h,
                              Clock::time_point now, std::vector<Outgoing>& out) {
  Header reply = ReplyTo(h);
  std::string document;  // an admin reply's JSON, sent as its payload frame
  switch (h.type) {
    case MsgType::kRegister:
    case MsgType::kHeartbeat:
    case MsgType::kDeregister:
      if (!OnNodeRequest(identity, h, now, reply, out)) return;
      break;
    case MsgType::kEvents:
    case MsgType::kInventory:
      OnNodeReport(identity, h, now, out);
      return;  // events and inventories get no reply
    case MsgType::kLocate: {
      const LocateRequest request = DecodeLocate(h);
      const auto located =
          AllCopies(h.keys, request.host, TenantScope(Server::kController, sender, h.type));
      AnswerLocate(located, reply);
      if (state_.Filling(now)) MarkRegistryFilling(reply);
      if (request.json) document = LocateJson(h.keys, located);
      break;
    }
    case MsgType::kScore:
      if (Status s = CheckScoreQuery(h.keys.size(), h.values); !s.ok()) {
        out = Reject(identity, &h, s);
        return;
      }
      document =
          ScoreJson(state_, h.keys, h.values, TenantScope(Server::kController, sender, h.type),
                    DecodeScore(h).nodes, now);
      break;
    case MsgType::kAuditMismatch:
      OnMismatch(identity, sender, h, now, reply, out);
      if (reply.status != ErrorCode::kOk) return;
      break;
    case MsgType::kAdminNodes:
      document = NodesJson(state_, now);
      break;
    case MsgType::kAdminStats:
      document = StatsJson(state_, now);
      break;
    case MsgType::kAdminHealth:
      document = HealthJson(state_, now, LeadershipOf(now));
      break;
    case MsgType::kAdminClear:
    case MsgType::kAdminPin:
    case MsgType::kAdminUnpin:
    case MsgType::kAdminEvict:
    case MsgType::kAdminRevoke: {
      const std::string engine = DecodeRevoke(h).engine;
      if (h.type == MsgType::kAdminRevoke) {
        if (!IsIdentityName(engine)) {
          out = Reject(identity, &h, InvalidArgument("revoke names an engine"));
          return;
        }
        // Recorded for the next leader before it takes effect.
        if (Status s = trust_ ? trust_->Revoke(engine) : Status::Ok(); !s.ok()) {
          out = Reject(identity, &h,
                       Unavailable("the revocation could not be recorded in " + trust_->where() +
                                   " (" + s.ToString() + "): not revoked; try again"));
          return;
        }
        revoked_->Add(engine);
        spdlog::warn("controller: engine {} revoked: its objects are dropped on every node",
                     engine);
      }
      auto sent = Forward(h, out);
      if (!sent.ok()) {
        out = Reject(identity, &h, sent.status());
        return;
      }
      document = ForwardedJson(*sent, h.keys.size());
      break;
    }
    default:
      out =
          Reject(identity, &h,
                 Unsupported("the controller does not serve " + std::string(MsgTypeName(h.type))));
      return;
  }
  Outgoing answer{identity, std::move(reply), {}};
  if (!document.empty()) {
    answer.payloads.push_back(
        SharedBuffer::Copy({reinterpret_cast<const uint8_t*>(document.data()), document.size()}));
  }
  out.push_back(std::move(answer));
}

bool ControllerHandler::OnNodeRequest(const std::string& identity, const Header& h,
                                      Clock::time_point now, Header& reply,
                                      std::vector<Outgoing>& out) {
  const auto [node_id, incarnation] = DecodeNodeIdentity(h);
  Stamp(reply);
  if (h.type == MsgType::kRegister) {
    const NodeRegistration reg = DecodeRegister(h);
    auto index = state_.Register(reg, now);
    if (!index.ok()) {
      out = Reject(identity, &h, index.status());
      return false;
    }
    identities_[node_id] = identity;
    // A node that was away when an engine was revoked learns of it here.
    const std::set<std::string> revoked = revoked_->Names();
    EncodeRegisterReply({*index, {revoked.begin(), revoked.end()}}, reply);
    spdlog::info("node {} registered (incarnation {}, {})", node_id, incarnation, reg.tcp);
    return true;
  }
  if (h.type == MsgType::kHeartbeat) {
    Status s = state_.Heartbeat(node_id, incarnation, DecodeHeartbeat(h), now);
    if (s.ok()) {
      identities_[node_id] = identity;
      // An inventory that never arrived (lost part, lost kResync) is asked for again.
      if (state_.TakeResyncRequest(node_id, incarnation, now)) {
        spdlog::warn("node {}: inventory overdue, asking again", node_id);
        EncodeHeartbeatReply({.resync = true}, reply);
      }
    }
    reply.status = s.code();
    reply.reason = s.message();
    return true;
  }
  Status s = state_.Deregister(node_id, incarnation);
  reply.status = s.code();
  reply.reason = s.message();
  if (s.ok()) spdlog::info("node {} deregistered", node_id);
  return true;
}

std::vector<OwnerId> ControllerHandler::InternOwners(
    const std::vector<std::optional<Owner>>& owners) {
  std::vector<OwnerId> ids(1, kUnknownOwner);  // slot 0: not known
  for (const auto& owner : owners) {
    if (!owner) bad_owners_++;
    // A full table leaves the owner not known: no tenant is answered it.
    ids.push_back(owner ? InternOwner(*owner).value_or(kUnknownOwner) : kUnknownOwner);
  }
  return ids;
}

void ControllerHandler::OnNodeReport(const std::string& identity, const Header& h,
                                     Clock::time_point now, std::vector<Outgoing>& out) {
  const NodeReport r = DecodeReport(h);
  const std::vector<OwnerId> owners = InternOwners(r.owners);
  const ClusterState::Report report{r.keys, r.values, owners};
  const bool events = h.type == MsgType::kEvents;
  const auto outcome =
      events ? state_.ApplyEvents(r.node_id, r.incarnation, r.seq, report, now)
             : state_.ApplyInventory(r.node_id, r.incarnation, r.seq, r.part, r.final, report, now);
  if (outcome != ClusterState::Outcome::kNeedResync) return;
  spdlog::warn("node {}: {} at {}, asking for a resync", r.node_id,
               events ? "event sequence gap" : "inventory part missing", r.seq);
  Header resync;
  resync.type = MsgType::kResync;
  Stamp(resync);
  out.push_back({identity, std::move(resync), {}});
}

std::vector<Located> ControllerHandler::AllCopies(std::span<const ChunkKey> keys,
                                                  const std::string& host,
                                                  const std::string* only_tenant) const {
  std::vector<Located> all(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    Located& l = all[i];
    l.copies = state_.Locate(keys[i], host, &l.provenance);
    if (!TenantMaySee(only_tenant, FindOwner(l.provenance.owner))) {
      l = {};  // another tenant's key: as if absent
      continue;
    }
    // The cheapest few: what a reader needs, and a reply every client can decode.
    if (l.copies.size() > kMaxLocateCopies) l.copies.resize(kMaxLocateCopies);
  }
  return all;
}

AuditLedger::Report ControllerHandler::ReportOf(const std::string& reporter,
                                                const CurvePeer* sender,
                                                const MismatchReport& reported) const {
  AuditLedger::Report r;
  r.reporter = reporter;
  r.trusted = sender == nullptr;
  r.key = reported.key;
  Registry::Provenance p;
  r.held = !state_.Locate(r.key, "", &p).empty();
  const Owner* owner = FindOwner(p.owner);
  r.checksum = reported.checksum;
  // The writer: the registry's when one wrote every copy, else (several
  // writers, an owner not known, a key already dropped) what the object
  // the auditor fetched named.
  r.writer = owner && !p.several_writers ? owner->writer : reported.writer;
  if (!IsIdentityName(r.writer)) r.writer = kUnknownWriter;
  // The tenant the evidence is about: the object's as the registry knows
  // it (an owner not known: none an engine has), else the reporter's.
  if (r.held)
    r.tenant = owner ? owner->tenant : std::string(kUnknownWriter);
  else
    r.tenant = sender ? sender->tenant : "";
  return r;
}

void ControllerHandler::OnMismatch(const std::string& identity, const CurvePeer* sender,
                                   const Header& h, Clock::time_point now, Header& reply,
                                   std::vector<Outgoing>& out) {
  const std::string* tenant = TenantScope(Server::kController, sender, h.type);
  // Who reports: an engine by its name; a trusted (insecure) client by its
  // connection, the only thing that tells two of them apart.
  const std::string reporter = sender ? sender->name : "connection " + HexOf(identity);
  Header drop;
  drop.type = MsgType::kAdminEvict;  // forwarded as kDelete to every live node
  uint64_t refused = 0;
  for (const MismatchReport& reported : DecodeMismatches(h)) {
    const AuditLedger::Report r = ReportOf(reporter, sender, reported);
    // A held key of another tenant: an engine cannot drop another tenant's
    // objects by naming their keys.
    if (r.held && tenant && r.tenant != *tenant) continue;
    const auto verdict = state_.audits().Take(r, now);
    if (verdict == AuditLedger::Verdict::kIgnored) continue;
    if (verdict == AuditLedger::Verdict::kRefused) {
      spdlog::warn("controller: {} reports audit mismatches past its rate: {} kept", reporter,
                   r.key.Hex());
      refused++;
      continue;
    }
    const bool confirmed = verdict == AuditLedger::Verdict::kConfirmed;
    if (confirmed && trust_) {
      const uint64_t count = state_.audits().Stats().confirmed_by_writer[r.writer];
      if (Status s = trust_->Confirmed(r.writer, count); !s.ok())
        spdlog::error("controller: {}'s confirmed count not recorded in {}: {}", r.writer,
                      trust_->where(), s.ToString());
    }
    spdlog::warn("controller: an audit by {} found {} (written by {}) wrong{}{}", reporter,
                 r.key.Hex(), r.writer, r.held ? ": dropped everywhere" : "",
                 confirmed ? "; a second reporter confirms it, counted against " + r.writer : "");
    if (r.held) drop.keys.push_back(r.key);
  }
  EncodeMismatchReply({drop.keys.size(), refused}, reply);
  if (drop.keys.empty()) return;
  auto sent = Forward(drop, out);
  if (!sent.ok()) {
    out = Reject(identity, &h, sent.status());
    reply.status = sent.status().code();
  }
}

void ControllerHandler::AnswerLocate(const std::vector<Located>& all, Header& reply) const {
  LocateReplyEncoder encoder(reply);
  for (const auto& located : all) encoder.AddKey(located.copies);
  encoder.Finish();
}

Result<std::vector<std::string>> ControllerHandler::Forward(const Header& h,
                                                            std::vector<Outgoing>& out) const {
  const std::string node_id = DecodeAdminTarget(h).node_id;
  Header command;
  command.type = h.type == MsgType::kAdminClear    ? MsgType::kClear
                 : h.type == MsgType::kAdminPin    ? MsgType::kPin
                 : h.type == MsgType::kAdminUnpin  ? MsgType::kUnpin
                 : h.type == MsgType::kAdminRevoke ? MsgType::kRevoke
                                                   : MsgType::kDelete;
  const Revocation revocation = DecodeRevoke(h);  // kAdminRevoke's
  // Only the first node sweeps the remote tier, whatever the request said.
  if (h.type == MsgType::kAdminRevoke)
    command = EncodeRevoke(MsgType::kRevoke, {revocation.engine, false});
  command.keys = h.keys;
  Stamp(command);
  std::vector<std::string> sent;
  for (const auto& [index, id] : state_.LiveNodes(h.type == MsgType::kAdminClear ? node_id : "")) {
    auto it = identities_.find(id);
    if (it == identities_.end()) continue;
    out.push_back({it->second, command, {}});
    // A revocation's remote tier (Redis) is swept by one node, the first.
    if (command.type == MsgType::kRevoke && sent.empty()) {
      out.back().header = EncodeRevoke(MsgType::kRevoke, {revocation.engine, true});
      Stamp(out.back().header);
    }
    sent.push_back(id);
  }
  if (h.type == MsgType::kAdminClear && !node_id.empty() && sent.empty())
    return NotFound("no live node " + node_id);
  return sent;
}

Leadership ControllerHandler::LeadershipOf(Clock::time_point now) const {
  Leadership l;
  l.leaderships = counters_[stats::HandlerCounter::kLeaderships];
  l.step_downs = counters_[stats::HandlerCounter::kStepDowns];
  const LeaderElection* election = election_.load();
  if (!election) return l;
  const ElectionView v = election->View(now);
  l.role = v.leader ? "leader" : "standby";
  l.leader = v.current.endpoint;
  l.lease_ttl_ms = election->options().ttl.count();
  l.lease_left_ms = v.lease_left.count();
  l.last_failover_seconds = v.last_failover_seconds;
  for (const auto& m : v.members) {
    if (m.endpoint != l.leader) l.standbys.push_back(m.endpoint);
  }
  return l;
}

void ControllerHandler::Tick(Clock::time_point now) {
  if (!Leading(now)) return;
  auto changes = state_.Tick(now);
  for (const auto& id : changes.died) spdlog::warn("node {} is dead: its entries were removed", id);
  for (const auto& id : changes.forgotten) identities_.erase(id);
}

}  // namespace pikv::controller
