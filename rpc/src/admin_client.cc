#include "pikv/rpc/admin_client.h"

#include <nlohmann/json.hpp>

#include "pikv/proto/admin_wire.h"
#include "pikv/proto/locate_reply.h"

namespace pikv::rpc {

AdminClient::AdminClient(std::string endpoint, std::chrono::milliseconds timeout,
                         std::optional<CurveClientKeys> curve)
    : rpc_(std::move(endpoint), {}, std::move(curve)), timeout_(timeout) {}

Result<std::vector<std::vector<Replica>>> AdminClient::Locate(const std::vector<ChunkKey>& keys,
                                                              const std::string& host) {
  Message req;
  req.header.type = MsgType::kLocate;
  req.header.keys = keys;
  req.header.fields["host"] = host;
  auto reply = rpc_.Call(std::move(req), timeout_);
  if (!reply.ok()) return reply.status();
  const Header& h = reply->header;
  if (h.status != ErrorCode::kOk) return Status(h.status, h.reason);
  auto copies = DecodeLocateReply(h, keys.size());
  if (!copies.ok()) return copies.status();
  std::vector<std::vector<Replica>> out(keys.size());
  for (size_t k = 0; k < keys.size(); ++k) {
    for (auto& c : (*copies)[k]) {
      out[k].push_back({Location{c.node, c.tier}, std::move(c.node_id), std::move(c.host),
                        std::move(c.tcp), std::move(c.ipc)});
    }
  }
  return out;
}

Result<std::string> AdminClient::Json(MsgType type, const std::vector<ChunkKey>& keys,
                                      Fields fields) {
  Message req;
  req.header.type = type;
  req.header.keys = keys;
  req.header.fields = std::move(fields);
  if (type == MsgType::kLocate) req.header.fields[admin::kJsonField] = int64_t{1};
  auto reply = rpc_.Call(std::move(req), timeout_);
  if (!reply.ok()) return reply.status();
  if (reply->header.status != ErrorCode::kOk)
    return Status(reply->header.status, reply->header.reason);
  if (reply->payloads.size() != 1) return ProtocolError("the reply carries no document");
  const SharedBuffer& doc = reply->payloads.front();
  if (doc.size() > admin::kMaxAdminReplyBytes) return TooLarge("the reply's document is too large");
  return std::string(reinterpret_cast<const char*>(doc.data()), doc.size());
}

Result<ClusterHealth> AdminClient::Health() {
  auto doc = Json(MsgType::kAdminHealth);
  if (!doc.ok()) return doc.status();
  const auto j = nlohmann::json::parse(*doc, nullptr, /*allow_exceptions=*/false);
  auto count = [&](const char* name) -> const nlohmann::json* {
    auto it = j.find(name);
    return it != j.end() && it->is_number_unsigned() ? &*it : nullptr;
  };
  if (!j.is_object() || !count(admin::kNodesAlive) || !count(admin::kNodesSuspect) ||
      !count(admin::kNodesDead) || !j.contains(admin::kStatus) || !j[admin::kStatus].is_string()) {
    return ProtocolError("the controller's health document is not one");
  }
  ClusterHealth h;
  h.ok = j[admin::kStatus] == "ok";
  h.nodes_alive = count(admin::kNodesAlive)->get<uint64_t>();
  h.nodes_suspect = count(admin::kNodesSuspect)->get<uint64_t>();
  h.nodes_dead = count(admin::kNodesDead)->get<uint64_t>();
  return h;
}

}  // namespace pikv::rpc
