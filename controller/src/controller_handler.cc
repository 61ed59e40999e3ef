#include "pikv/controller/controller_handler.h"

#include <spdlog/spdlog.h>

#include "pikv/controller/views.h"
#include "pikv/proto/admin_wire.h"
#include "pikv/proto/locate_reply.h"

namespace pikv::controller {

std::vector<ControllerHandler::Outgoing> ControllerHandler::Reject(const std::string& identity,
                                                                   const Header* req,
                                                                   const Status& why) {
  rejected_++;
  Header h;
  if (req) {
    h = ReplyTo(*req, why.code(), why.message());
  } else {
    h.type = MsgType::kError;
    h.status = why.code();
    h.reason = why.message();
  }
  spdlog::debug("controller: rejected a request: {}", why.ToString());
  return {{identity, std::move(h)}};
}

std::vector<ControllerHandler::Outgoing> ControllerHandler::Handle(const std::string& identity,
                                                                   const CurvePeer* sender,
                                                                   std::span<const uint8_t> header,
                                                                   size_t payload_frames,
                                                                   Clock::time_point now) {
  auto decoded = DecodeHeader(header, limits_);
  if (!decoded.ok()) return Reject(identity, nullptr, decoded.status());
  const Header& h = *decoded;
  if (Status allowed = Authorize(sender, h); !allowed.ok()) {
    spdlog::warn("controller: refused {} from {}: {}", MsgTypeName(h.type), sender->UserId(),
                 allowed.message());
    return Reject(identity, &h, allowed);
  }
  if (payload_frames > 0)
    return Reject(identity, &h, InvalidArgument("the controller takes no payload frames"));
  std::vector<Outgoing> out;
  Apply(identity, h, now, out);
  return out;
}

Status ControllerHandler::Authorize(const CurvePeer* sender, const Header& h) {
  switch (h.type) {
    case MsgType::kRegister:
    case MsgType::kHeartbeat:
    case MsgType::kEvents:
    case MsgType::kInventory:
    case MsgType::kDeregister: {
      const std::string node_id = FieldString(h.fields, "node_id");
      if (MaySpeakForNode(sender, node_id)) return Status::Ok();
      return PermissionDenied("only node " + node_id + "'s key speaks for it");
    }
    case MsgType::kAdminClear:
    case MsgType::kAdminPin:
    case MsgType::kAdminUnpin:
    case MsgType::kAdminEvict:
      if (MayAdminister(sender)) return Status::Ok();
      return PermissionDenied(std::string(MsgTypeName(h.type)) + " needs an admin key");
    default:
      return Status::Ok();  // locate and the read-only admin documents: any admitted key
  }
}

void ControllerHandler::Apply(const std::string& identity, const Header& h, Clock::time_point now,
                              std::vector<Outgoing>& out) {
  const std::string node_id = FieldString(h.fields, "node_id");
  const uint64_t incarnation = static_cast<uint64_t>(FieldInt(h.fields, "incarnation"));
  auto resync = [&] {
    Header r;
    r.type = MsgType::kResync;
    out.push_back({identity, std::move(r)});
  };
  Header reply = ReplyTo(h);
  std::string document;  // an admin reply's JSON, sent as its payload frame
  switch (h.type) {
    case MsgType::kRegister: {
      NodeRegistration reg{
          node_id,
          FieldString(h.fields, "host"),
          FieldString(h.fields, "tcp"),
          FieldString(h.fields, "ipc"),
          incarnation,
          static_cast<uint64_t>(std::max<int64_t>(0, FieldInt(h.fields, "cpu_capacity"))),
          static_cast<uint64_t>(std::max<int64_t>(0, FieldInt(h.fields, "disk_capacity")))};
      auto index = state_.Register(reg, now);
      if (!index.ok()) {
        out = Reject(identity, &h, index.status());
        return;
      }
      identities_[node_id] = identity;
      reply.fields["epoch"] = std::to_string(state_.epoch());
      reply.fields["node_index"] = int64_t{*index};
      spdlog::info("node {} registered (incarnation {}, {})", node_id, incarnation, reg.tcp);
      break;
    }
    case MsgType::kHeartbeat: {
      Status s = state_.Heartbeat(node_id, incarnation, h.fields, now);
      if (s.ok()) {
        identities_[node_id] = identity;
        // An inventory that never arrived (lost part, lost kResync) is asked for again.
        if (state_.TakeResyncRequest(node_id, incarnation, now)) {
          spdlog::warn("node {}: inventory overdue, asking again", node_id);
          reply.fields["resync"] = int64_t{1};
        }
      }
      reply.status = s.code();
      reply.reason = s.message();
      reply.fields["epoch"] = std::to_string(state_.epoch());
      break;
    }
    case MsgType::kEvents: {
      auto seq = static_cast<uint64_t>(FieldInt(h.fields, "seq"));
      if (state_.ApplyEvents(node_id, incarnation, seq, h.keys, h.values, now) ==
          ClusterState::Outcome::kNeedResync) {
        spdlog::warn("node {}: event sequence gap at {}, asking for a resync", node_id, seq);
        resync();
      }
      return;  // events get no reply
    }
    case MsgType::kInventory: {
      if (state_.ApplyInventory(
              node_id, incarnation, static_cast<uint64_t>(FieldInt(h.fields, "seq")),
              static_cast<uint64_t>(FieldInt(h.fields, "part")), FieldInt(h.fields, "final") != 0,
              h.keys, h.values, now) == ClusterState::Outcome::kNeedResync) {
        spdlog::warn("node {}: inventory part missing, asking for it again", node_id);
        resync();
      }
      return;
    }
    case MsgType::kDeregister: {
      Status s = state_.Deregister(node_id, incarnation);
      reply.status = s.code();
      reply.reason = s.message();
      if (s.ok()) spdlog::info("node {} deregistered", node_id);
      break;
    }
    case MsgType::kLocate: {
      std::map<uint16_t, const Replica*> referenced;
      std::vector<std::vector<Replica>> all;
      const std::string host = FieldString(h.fields, "host");
      for (const auto& k : h.keys) {
        all.push_back(state_.Locate(k, host));
        // The cheapest few: what a reader needs, and a reply every client can decode.
        if (all.back().size() > kMaxLocateCopies) all.back().resize(kMaxLocateCopies);
      }
      for (const auto& replicas : all) {
        reply.values.push_back(static_cast<int64_t>(replicas.size()));
        for (const auto& r : replicas) {
          reply.values.push_back(r.location.Code());
          referenced[r.location.node] = &r;
        }
      }
      for (const auto& [index, r] : referenced) {
        const std::string p = "n" + std::to_string(index) + ".";
        reply.fields[p + "id"] = r->node_id;
        reply.fields[p + "host"] = r->host;
        reply.fields[p + "tcp"] = r->tcp;
        reply.fields[p + "ipc"] = r->ipc;
      }
      if (FieldInt(h.fields, admin::kJsonField)) document = LocateJson(h.keys, all);
      break;
    }
    case MsgType::kAdminNodes:
      document = NodesJson(state_, now);
      break;
    case MsgType::kAdminStats:
      document = StatsJson(state_, now);
      break;
    case MsgType::kAdminHealth:
      document = HealthJson(state_, now);
      break;
    case MsgType::kAdminClear:
    case MsgType::kAdminPin:
    case MsgType::kAdminUnpin:
    case MsgType::kAdminEvict: {
      Header command;
      command.type = h.type == MsgType::kAdminClear   ? MsgType::kClear
                     : h.type == MsgType::kAdminPin   ? MsgType::kPin
                     : h.type == MsgType::kAdminUnpin ? MsgType::kUnpin
                                                      : MsgType::kDelete;
      command.keys = h.keys;
      std::vector<std::string> sent;
      for (const auto& [index, id] :
           state_.LiveNodes(h.type == MsgType::kAdminClear ? node_id : "")) {
        auto it = identities_.find(id);
        if (it == identities_.end()) continue;
        out.push_back({it->second, command});
        sent.push_back(id);
      }
      if (h.type == MsgType::kAdminClear && !node_id.empty() && sent.empty()) {
        out = Reject(identity, &h, NotFound("no live node " + node_id));
        return;
      }
      document = ForwardedJson(sent, h.keys.size());
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

void ControllerHandler::Tick(Clock::time_point now) {
  auto changes = state_.Tick(now);
  for (const auto& id : changes.died) spdlog::warn("node {} is dead: its entries were removed", id);
  for (const auto& id : changes.forgotten) identities_.erase(id);
}

}  // namespace pikv::controller
