#include "pikv/rpc/admin_client.h"

#include <nlohmann/json.hpp>

#include "pikv/proto/admin_wire.h"
#include "pikv/proto/locate_reply.h"

namespace pikv::rpc {

AdminClient::AdminClient(Result<std::shared_ptr<ControllerFinder>> finder,
                         std::chrono::milliseconds timeout, std::optional<CurveClientKeys> curve)
    : curve_(std::move(curve)), timeout_(timeout) {
  if (finder.ok()) {
    finder_ = std::move(*finder);
  } else {
    invalid_ = InvalidArgument("controller: " + finder.status().message());
  }
}

AdminClient::~AdminClient() = default;

Result<Message> AdminClient::Call(const Message& request) {
  if (!finder_) return invalid_;
  using std::chrono::milliseconds;
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  // Until a controller has answered as leader, each listed one gets its
  // share of the deadline, so that a dead first one leaves time for the rest.
  const int listed = static_cast<int>(finder_->listed().size());
  Status last = Unavailable("no leader found among " + finder_->spec());
  for (int attempt = 0; attempt < listed + 2; ++attempt) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    // Only a client that never reached a controller waits for the finder
    // to name one; later, none known is an answer at once (the caller
    // degrades: an engine recomputes rather than waits for a failover).
    const std::string endpoint = answered_ ? finder_->Current() : finder_->Await(deadline);
    if (left.count() <= 0 || endpoint.empty()) break;
    if (!rpc_ || rpc_->endpoint() != endpoint)
      rpc_ = std::make_unique<RpcClient>(endpoint, WireLimits{}, curve_);
    const auto budget =
        confirmed_ || listed < 2 ? left : std::max(left / listed, std::min(left, milliseconds(20)));
    auto reply = rpc_->Call(request, budget);
    if (reply.ok() && reply->header.status == ErrorCode::kNotLeader) {
      confirmed_ = false;
      finder_->FollowNotLeader(reply->header);
      last = Status(ErrorCode::kNotLeader, reply->header.reason);
      continue;
    }
    if (!reply.ok() && finder_->follows()) {
      confirmed_ = false;
      finder_->Failed(endpoint);  // the next attempt asks elsewhere
      rpc_.reset();
      last = reply.status();
      continue;
    }
    confirmed_ = reply.ok();
    answered_ = answered_ || reply.ok();
    return reply;
  }
  return last;
}

Result<std::vector<std::vector<Replica>>> AdminClient::Locate(const std::vector<ChunkKey>& keys,
                                                              const std::string& host) {
  Message req;
  req.header.type = MsgType::kLocate;
  req.header.keys = keys;
  EncodeLocate({host, /*json=*/false}, req.header);
  auto reply = Call(req);
  if (!reply.ok()) return reply.status();
  const Header& h = reply->header;
  if (h.status != ErrorCode::kOk) return Status(h.status, h.reason);
  return DecodeLocateReply(h, keys.size());
}

Result<uint64_t> AdminClient::ReportMismatch(const std::vector<MismatchReport>& reports) {
  Message req;
  req.header = EncodeMismatches(reports);
  auto reply = Call(req);
  if (!reply.ok()) return reply.status();
  const Header& h = reply->header;
  if (h.status != ErrorCode::kOk) return Status(h.status, h.reason);
  auto decoded = DecodeMismatchReply(h);
  if (!decoded.ok()) return decoded.status();
  return decoded->dropped;
}

Result<std::string> AdminClient::Json(MsgType type, const std::vector<ChunkKey>& keys,
                                      const AdminArgs& args) {
  Message req;
  if (type == MsgType::kAdminRevoke) req.header = EncodeRevoke(type, {args.engine});
  req.header.type = type;
  req.header.keys = keys;
  if (type == MsgType::kLocate) EncodeLocate({args.host, /*json=*/true}, req.header);
  if (type == MsgType::kScore) {
    EncodeScore(args.score, req.header);
    req.header.values = args.tokens;
  }
  EncodeAdminTarget({args.node}, req.header);
  auto reply = Call(req);
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
