#include "pikv/controller/admin_client.h"

namespace pikv::controller {

AdminClient::AdminClient(std::string endpoint, std::chrono::milliseconds timeout)
    : rpc_(std::move(endpoint)), timeout_(timeout) {}

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
  std::vector<std::vector<Replica>> out(keys.size());
  size_t v = 0;
  for (size_t k = 0; k < keys.size(); ++k) {
    if (v >= h.values.size()) return ProtocolError("locate reply is short");
    const int64_t n = h.values[v++];
    if (n < 0 || v + static_cast<size_t>(n) > h.values.size())
      return ProtocolError("locate reply is malformed");
    for (int64_t i = 0; i < n; ++i) {
      Location loc = Location::FromCode(static_cast<uint16_t>(h.values[v++]));
      const std::string p = "n" + std::to_string(loc.node) + ".";
      out[k].push_back({loc, FieldString(h.fields, p + "id"), FieldString(h.fields, p + "host"),
                        FieldString(h.fields, p + "tcp"), FieldString(h.fields, p + "ipc")});
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
  if (type == MsgType::kLocate) req.header.fields["json"] = int64_t{1};
  auto reply = rpc_.Call(std::move(req), timeout_);
  if (!reply.ok()) return reply.status();
  if (reply->header.status != ErrorCode::kOk)
    return Status(reply->header.status, reply->header.reason);
  std::string json = FieldString(reply->header.fields, "json");
  if (json.empty()) return ProtocolError("reply carries no JSON");
  return json;
}

}  // namespace pikv::controller
