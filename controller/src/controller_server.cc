#include "pikv/controller/controller_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <map>
#include <random>
#include <thread>

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
      text += "pikv_controller_rejected_requests_total " + std::to_string(self->rejected()) + "\n";
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

void ControllerServer::Stop() {
  if (!loop_ || loop_->stopping.exchange(true)) return;
  if (loop_->thread.joinable()) loop_->thread.join();
  loop_->http.stop();
  if (loop_->http_thread.joinable()) loop_->http_thread.join();
  loop_->router.close();
}

void ControllerServer::Run() {
  Loop& l = *loop_;
  ClusterState& state = *state_;
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
      for (const auto& id : state.Tick(now))
        spdlog::warn("node {} is dead: its entries were removed", id);
      next_tick = now + kTick;
    }
    // Drain what is ready, then tick again.
    for (int burst = 0; burst < 256 && RecvFrames(l.router, frames, zmq::recv_flags::dontwait);
         ++burst) {
      const std::string identity(static_cast<const char*>(frames[0].data()), frames[0].size());
      auto reject = [&](const Header* req, const Status& why) {
        rejected_++;
        Header h = req ? ReplyTo(*req, why.code(), why.message()) : Header{};
        if (!req) {
          h.type = MsgType::kError;
          h.status = why.code();
          h.reason = why.message();
        }
        l.Send(identity, h);
      };
      if (frames.size() < 2) {
        reject(nullptr, ProtocolError("message has no header frame"));
        continue;
      }
      auto decoded = DecodeHeader({static_cast<const uint8_t*>(frames[1].data()), frames[1].size()},
                                  options_.limits);
      if (!decoded.ok()) {
        reject(nullptr, decoded.status());
        continue;
      }
      Header& h = *decoded;
      if (frames.size() > 2) {
        reject(&h, InvalidArgument("the controller takes no payload frames"));
        continue;
      }
      const std::string node_id = FieldString(h.fields, "node_id");
      const uint64_t incarnation = static_cast<uint64_t>(FieldInt(h.fields, "incarnation"));
      Header reply = ReplyTo(h);
      switch (h.type) {
        case MsgType::kRegister: {
          NodeRegistration reg{node_id,
                               FieldString(h.fields, "host"),
                               FieldString(h.fields, "tcp"),
                               FieldString(h.fields, "ipc"),
                               incarnation,
                               static_cast<uint64_t>(FieldInt(h.fields, "cpu_capacity")),
                               static_cast<uint64_t>(FieldInt(h.fields, "disk_capacity"))};
          auto index = state.Register(reg, now);
          if (!index.ok()) {
            reject(&h, index.status());
            continue;
          }
          l.identities[node_id] = identity;
          reply.fields["epoch"] = std::to_string(state.epoch());
          reply.fields["node_index"] = int64_t{*index};
          spdlog::info("node {} registered (incarnation {}, {})", node_id, incarnation, reg.tcp);
          break;
        }
        case MsgType::kHeartbeat: {
          Status s = state.Heartbeat(node_id, incarnation, h.fields, now);
          if (s.ok()) l.identities[node_id] = identity;
          reply.status = s.code();
          reply.reason = s.message();
          reply.fields["epoch"] = std::to_string(state.epoch());
          break;
        }
        case MsgType::kEvents: {
          auto seq = static_cast<uint64_t>(FieldInt(h.fields, "seq"));
          if (state.ApplyEvents(node_id, incarnation, seq, h.keys, h.values, now) ==
              ClusterState::Outcome::kNeedResync) {
            spdlog::warn("node {}: event sequence gap at {}, asking for a resync", node_id, seq);
            Header resync;
            resync.type = MsgType::kResync;
            l.Send(identity, resync);
          }
          continue;  // events get no reply
        }
        case MsgType::kInventory:
          state.ApplyInventory(node_id, incarnation,
                               static_cast<uint64_t>(FieldInt(h.fields, "seq")),
                               static_cast<uint64_t>(FieldInt(h.fields, "part")),
                               FieldInt(h.fields, "final") != 0, h.keys, h.values, now);
          continue;
        case MsgType::kDeregister: {
          Status s = state.Deregister(node_id, incarnation);
          reply.status = s.code();
          reply.reason = s.message();
          spdlog::info("node {} deregistered", node_id);
          break;
        }
        case MsgType::kLocate: {
          std::map<uint16_t, const Replica*> referenced;
          std::vector<std::vector<Replica>> all;
          const std::string host = FieldString(h.fields, "host");
          for (const auto& k : h.keys) all.push_back(state.Locate(k, host));
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
          if (FieldInt(h.fields, "json")) reply.fields["json"] = LocateJson(h.keys, all);
          break;
        }
        case MsgType::kAdminNodes:
          reply.fields["json"] = NodesJson(state, now);
          break;
        case MsgType::kAdminStats:
          reply.fields["json"] = StatsJson(state, now);
          break;
        case MsgType::kAdminHealth:
          reply.fields["json"] = HealthJson(state, now);
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
          std::string list;
          int sent = 0;
          for (const auto& [index, id] :
               state.LiveNodes(h.type == MsgType::kAdminClear ? node_id : "")) {
            auto it = l.identities.find(id);
            if (it == l.identities.end()) continue;
            l.Send(it->second, command);
            list += (sent++ ? ",\"" : "\"") + id + "\"";
          }
          if (h.type == MsgType::kAdminClear && !node_id.empty() && sent == 0) {
            reject(&h, NotFound("no live node " + node_id));
            continue;
          }
          reply.fields["json"] =
              "{\"forwarded_to\":[" + list + "],\"keys\":" + std::to_string(h.keys.size()) + "}";
          break;
        }
        default:
          reject(&h,
                 Unsupported("the controller does not serve " + std::string(MsgTypeName(h.type))));
          continue;
      }
      l.Send(identity, reply);
    }
  }
}

}  // namespace pikv::controller
