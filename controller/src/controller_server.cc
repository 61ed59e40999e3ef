#include "pikv/controller/controller_server.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>

#include "pikv/common/guarded_thread.h"
#include "pikv/common/split.h"
#include "pikv/controller/controller_handler.h"
#include "pikv/controller/views.h"
#include "pikv/http/http_server.h"
#include "pikv/proto/control_wire.h"
#include "pikv/proto/owner.h"
#include "pikv/transport/zmq_frames.h"

namespace pikv::controller {

namespace {

constexpr auto kTick = std::chrono::milliseconds(100);

// "k1,k2,...": at most one batch of 32-hex-digit keys.
Result<std::vector<ChunkKey>> ParseKeyList(const std::string& list) {
  std::vector<ChunkKey> keys;
  for (std::string_view hex : SplitList(list)) {
    auto key = ChunkKey::FromHex(std::string(hex));
    if (!key || keys.size() >= WireLimits{}.max_batch) return InvalidArgument("bad key list");
    keys.push_back(*key);
  }
  return keys;
}

// "n1,n2,...": at most one batch of counts; empty: none.
Result<std::vector<int64_t>> ParseCountList(const std::string& list) {
  std::vector<int64_t> counts;
  if (list.empty()) return counts;
  for (std::string_view item : SplitList(list)) {
    int64_t n = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), n);
    if (ec != std::errc() || ptr != item.data() + item.size() ||
        counts.size() >= WireLimits{}.max_batch)
      return InvalidArgument("bad count list");
    counts.push_back(n);
  }
  return counts;
}

http::Response JsonResponse(int status, std::string body) {
  return http::Response{status, "application/json", std::move(body)};
}

http::Response BadQuery(const std::string& why) {
  return JsonResponse(400, nlohmann::json{{"error", why}}.dump());
}

// GET /score?key=k1,...[&tokens=n1,...][&node=id,...][&tenant=name]
// ("default": the default tenant; absent: every tenant's keys count).
http::Response ScoreRoute(const ClusterState& state, const http::Request& req) {
  auto keys = ParseKeyList(req.Param("key"));
  if (!keys.ok()) return BadQuery("key must be 32-hex-digit keys, comma-separated");
  auto tokens = ParseCountList(req.Param("tokens"));
  if (!tokens.ok()) return BadQuery("tokens must be counts, comma-separated");
  if (Status s = CheckScoreQuery(keys->size(), *tokens); !s.ok()) return BadQuery(s.message());
  const auto tenant_param = req.query.find("tenant");
  std::optional<std::string> tenant;
  if (tenant_param != req.query.end()) {
    tenant = tenant_param->second == "default" ? "" : tenant_param->second;
    if (!IsTenantName(*tenant)) return BadQuery("tenant is not a tenant's name");
  }
  const auto only = ScoreCandidates(req.Param("node"));
  return JsonResponse(
      200, ScoreJson(state, *keys, *tokens, tenant ? &*tenant : nullptr, only, Clock::now()));
}

}  // namespace

struct ControllerServer::Loop {
  zmq::context_t context{1};
  std::unique_ptr<ZapHandler> zap;  // outlives the router it admits peers to
  zmq::socket_t router{context, zmq::socket_type::router};
  std::atomic<bool> stopping{false};
  std::thread thread;
  std::unique_ptr<http::Server> http;

  void Send(const std::string& identity, const Header& header,
            const std::vector<SharedBuffer>& payloads = {}) {
    std::vector<zmq::message_t> routing;
    routing.emplace_back(identity.data(), identity.size());
    if (!SendMessage(router, routing, header, payloads, /*dontwait=*/true)) {
      spdlog::debug("controller: reply to a departed peer dropped");
    }
  }
};

Result<std::unique_ptr<ControllerServer>> ControllerServer::Start(ControllerOptions options) {
  std::unique_ptr<ControllerServer> server(new ControllerServer());
  server->options_ = options;
  std::random_device rd;
  // Alone, a random epoch tells nodes of a restart; elected, the election's.
  const uint64_t epoch = options.etcd.empty() ? (uint64_t{rd()} << 32 | rd()) & INT64_MAX : 0;
  server->state_ = std::make_unique<ClusterState>(options.lifecycle, epoch);
  server->handler_ = std::make_unique<ControllerHandler>(*server->state_, options.limits);
  auto loop = std::make_unique<Loop>();
  const bool secure = options.security && UsesCurve(options.endpoint);
  if (secure) {
    auto zap =
        ZapHandler::Start(loop->context.handle(), options.security->keyring,
                          server->handler_->revocations(), options.security->keyring_path,
                          [](const std::string& line) { spdlog::warn("controller: {}", line); });
    if (!zap.ok()) return zap.status();
    loop->zap = std::move(*zap);
  }
  try {
    loop->router.set(zmq::sockopt::linger, 0);
    loop->router.set(zmq::sockopt::maxmsgsize,
                     static_cast<int64_t>(options.limits.max_header_bytes * 2));
    ServeCurve(loop->router.handle(), secure ? options.security.get() : nullptr);
    loop->router.bind(options.endpoint);
    server->endpoint_ = loop->router.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return IoError("bind " + options.endpoint + ": " + e.what());
  }
  ControllerServer* self = server.get();
  if (Status s = server->StartHttp(*loop); !s.ok()) return s;
  if (!options.etcd.empty()) {
    ElectionOptions e;
    e.etcd = options.etcd;
    e.cluster = options.cluster;
    e.ttl = options.lease_ttl;
    e.endpoint = options.advertise.empty() ? server->endpoint_ : options.advertise;
    e.http = options.advertise_http.empty() ? server->http_address_ : options.advertise_http;
    if (e.endpoint.find("0.0.0.0") != std::string::npos ||
        e.endpoint.find('*') != std::string::npos)
      return InvalidArgument("bound to a wildcard address: give the endpoint to advertise");
    auto election = LeaderElection::Start(std::move(e));
    if (!election.ok()) return election.status();
    server->election_ = std::move(*election);
    server->handler_->Follow(server->election_.get());
    server->handler_->KeepTrustIn(std::make_unique<EtcdTrustRecord>(
        coord::EtcdClient(options.etcd, options.lease_ttl / 4), options.cluster));
  } else if (!options.trust_file.empty()) {
    server->handler_->KeepTrustIn(std::make_unique<FileTrustRecord>(options.trust_file));
  }
  server->loop_ = std::move(loop);
  // A failure is logged and serving stops, visibly (healthz stops answering).
  server->loop_->thread = GuardedThread("controller server", [self] { self->Serve(); });
  spdlog::info(
      "controller {} on {} ({})",
      server->election_ ? "standing for leader of '" + options.cluster + "'"
                        : "epoch " + std::to_string(epoch),
      server->endpoint_,
      secure ? "CURVE: keyring of " + std::to_string(options.security->keyring.size()) + " keys"
             : "security off");
  return server;
}

Status ControllerServer::StartHttp(Loop& loop) {
  const ControllerOptions& options = options_;
  ClusterState* state = state_.get();
  ControllerServer* self = this;
  if (!options.http.empty()) {
    const auto json = [](std::string body) { return JsonResponse(200, std::move(body)); };
    // Queries of the registry are a leader's to answer.
    const auto standby = [self]() -> std::optional<http::Response> {
      const Leadership l = self->leadership();
      if (l.role != "standby") return std::nullopt;
      return JsonResponse(503,
                          nlohmann::json{{"error", "not the leader"}, {"leader", l.leader}}.dump());
    };
    std::map<std::string, http::Handler> routes;
    routes["/healthz"] = [state, self, json](const http::Request&) {
      return json(HealthJson(*state, Clock::now(), self->leadership()));
    };
    routes["/nodes"] = [state, json](const http::Request&) {
      return json(NodesJson(*state, Clock::now()));
    };
    routes["/stats"] = [state, json](const http::Request&) {
      return json(StatsJson(*state, Clock::now()));
    };
    routes["/metrics"] = [state, self](const http::Request&) {
      return http::Response{
          200, "text/plain; version=0.0.4",
          MetricsText(*state, Clock::now(), self->leadership(), &self->handler_->counters())};
    };
    routes["/locate"] = [state, standby, json](const http::Request& req) {
      if (auto refused = standby()) return *refused;
      auto keys = ParseKeyList(req.Param("key"));
      if (!keys.ok()) return BadQuery("key must be 1-4096 keys of 32 hex digits, comma-separated");
      std::vector<Located> located(keys->size());
      for (size_t i = 0; i < keys->size(); ++i)
        located[i].copies = state->Locate((*keys)[i], req.Param("host"), &located[i].provenance);
      return json(LocateJson(*keys, located));
    };
    routes["/score"] = [state, standby](const http::Request& req) {
      if (auto refused = standby()) return *refused;
      return ScoreRoute(*state, req);
    };
    auto http = http::Server::Start({options.http}, std::move(routes));
    if (!http.ok()) return http.status();
    http_address_ = (*http)->address();
    loop.http = std::move(*http);
  }
  return Status::Ok();
}

Leadership ControllerServer::leadership() const { return handler_->LeadershipOf(Clock::now()); }

ControllerServer::~ControllerServer() { Stop(); }

uint64_t ControllerServer::rejected() const { return handler_->rejected(); }

void ControllerServer::Stop() {
  if (!loop_ || loop_->stopping.exchange(true)) return;
  if (loop_->thread.joinable()) loop_->thread.join();
  if (election_) election_->Stop();  // revokes the lease: a standby takes over at once
  if (loop_->http) loop_->http->Stop();
  loop_->router.close();
}

void ControllerServer::Serve() {
  Loop& l = *loop_;
  std::vector<zmq::message_t> frames;
  auto next_tick = Clock::now() + kTick;
  zmq::pollitem_t item{l.router.handle(), 0, ZMQ_POLLIN, 0};
  while (!l.stopping) {
    try {
      zmq::poll(&item, 1, kTick);
    } catch (const zmq::error_t& e) {
      spdlog::error("controller poll: {}", e.what());
      return;
    }
    const auto now = Clock::now();
    if (now >= next_tick) {
      handler_->Tick(now);
      next_tick = now + kTick;
    }
    // Drain what is ready, then tick again.
    for (int burst = 0; burst < 256 && RecvFrames(l.router, frames, zmq::recv_flags::dontwait);
         ++burst) {
      const std::string identity(static_cast<const char*>(frames[0].data()), frames[0].size());
      std::span<const uint8_t> header;
      if (frames.size() >= 2)
        header = {static_cast<const uint8_t*>(frames[1].data()), frames[1].size()};
      const size_t payloads = frames.size() > 2 ? frames.size() - 2 : 0;
      std::optional<CurvePeer> peer;
      const CurvePeer* sender = frames.size() >= 2 ? SenderOf(frames[1].handle(), peer) : nullptr;
      auto out = handler_->Handle(identity, sender, header, payloads, now);
      // A leader stalled while answering sends nothing it decided as leader.
      const bool leading = handler_->StillLeading();
      for (const auto& o : out) {
        if (leading || o.header.status == ErrorCode::kNotLeader)
          l.Send(o.identity, o.header, o.payloads);
      }
    }
  }
}

}  // namespace pikv::controller
