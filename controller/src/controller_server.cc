#include "pikv/controller/controller_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <map>
#include <random>
#include <thread>

#include "pikv/controller/controller_handler.h"
#include "pikv/controller/views.h"
#include "pikv/proto/zmq_frames.h"

namespace pikv::controller {

namespace {

constexpr auto kTick = std::chrono::milliseconds(100);

}  // namespace

struct ControllerServer::Loop {
  zmq::context_t context{1};
  zmq::socket_t router{context, zmq::socket_type::router};
  std::map<std::string, std::string> identities;  // node id -> ROUTER identity of its reporter
  std::atomic<bool> stopping{false};
  std::thread thread;
  httplib::Server http;
  std::thread http_thread;

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
  const uint64_t epoch = (uint64_t{rd()} << 32 | rd()) & INT64_MAX;
  server->state_ = std::make_unique<ClusterState>(options.lifecycle, epoch);
  server->handler_ = std::make_unique<ControllerHandler>(*server->state_, options.limits);
  auto loop = std::make_unique<Loop>();
  try {
    loop->router.set(zmq::sockopt::linger, 0);
    loop->router.set(zmq::sockopt::maxmsgsize,
                     static_cast<int64_t>(options.limits.max_header_bytes * 2));
    loop->router.bind(options.endpoint);
    server->endpoint_ = loop->router.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return IoError("bind " + options.endpoint + ": " + e.what());
  }
  ClusterState* state = server->state_.get();
  ControllerServer* self = server.get();
  if (!options.http.empty()) {
    auto colon = options.http.rfind(':');
    if (colon == std::string::npos) return InvalidArgument("--http wants host:port");
    const std::string host = options.http.substr(0, colon);
    const int port = std::atoi(options.http.c_str() + colon + 1);
    auto& http = loop->http;
    auto json = [](httplib::Response& res, const std::string& body) {
      res.set_content(body, "application/json");
    };
    http.Get("/healthz", [state, json](const httplib::Request&, httplib::Response& res) {
      json(res, HealthJson(*state, Clock::now()));
    });
    http.Get("/nodes", [state, json](const httplib::Request&, httplib::Response& res) {
      json(res, NodesJson(*state, Clock::now()));
    });
    http.Get("/stats", [state, json](const httplib::Request&, httplib::Response& res) {
      json(res, StatsJson(*state, Clock::now()));
    });
    http.Get("/metrics", [state, self](const httplib::Request&, httplib::Response& res) {
      std::string text = MetricsText(*state, Clock::now());
      text +=
          "# HELP pikv_controller_rejected_requests_total Malformed, oversized or unknown "
          "requests.\n";
      text += "# TYPE pikv_controller_rejected_requests_total counter\n";
      text += "pikv_controller_rejected_requests_total " +
              std::to_string(self->handler_->rejected()) + "\n";
      res.set_content(text, "text/plain; version=0.0.4");
    });
    http.Get("/locate", [state, json](const httplib::Request& req, httplib::Response& res) {
      std::vector<ChunkKey> keys;
      std::string list = req.get_param_value("key");
      for (size_t pos = 0; pos <= list.size();) {
        size_t end = std::min(list.find(',', pos), list.size());
        auto key = ChunkKey::FromHex(list.substr(pos, end - pos));
        if (!key) {
          res.status = 400;
          json(res, R"({"error":"key must be 32 hex digits, comma-separated"})");
          return;
        }
        keys.push_back(*key);
        pos = end + 1;
      }
      std::vector<std::vector<Replica>> replicas;
      for (const auto& k : keys) replicas.push_back(state->Locate(k, req.get_param_value("host")));
      json(res, LocateJson(keys, replicas));
    });
    int bound =
        port == 0 ? http.bind_to_any_port(host) : (http.bind_to_port(host, port) ? port : -1);
    if (bound < 0) return IoError("cannot bind HTTP to " + options.http);
    server->http_address_ = host + ":" + std::to_string(bound);
    loop->http_thread = std::thread([&http] { http.listen_after_bind(); });
  }
  server->loop_ = std::move(loop);
  server->loop_->thread = std::thread([self] { self->Run(); });
  spdlog::info("controller epoch {} on {}", epoch, server->endpoint_);
  return server;
}

ControllerServer::~ControllerServer() { Stop(); }

uint64_t ControllerServer::rejected() const { return handler_->rejected(); }

void ControllerServer::Stop() {
  if (!loop_ || loop_->stopping.exchange(true)) return;
  if (loop_->thread.joinable()) loop_->thread.join();
  loop_->http.stop();
  if (loop_->http_thread.joinable()) loop_->http_thread.join();
  loop_->router.close();
}

void ControllerServer::Run() {
  // Nothing may escape a thread: a failure is logged and serving stops,
  // visibly (healthz stops answering), instead of terminating the process.
  try {
    Serve();
  } catch (const std::exception& e) {
    spdlog::critical("controller server thread failed: {}", e.what());
  }
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
      if (frames.size() >= 2) header = {static_cast<const uint8_t*>(frames[1].data()), frames[1].size()};
      const size_t payloads = frames.size() > 2 ? frames.size() - 2 : 0;
      for (const auto& o : handler_->Handle(identity, header, payloads, now)) l.Send(o.identity, o.header);
    }
  }
}

}  // namespace pikv::controller
