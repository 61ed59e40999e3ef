#include "pikv/node/node_server.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "pikv/proto/zmq_frames.h"

namespace pikv::node {

namespace {

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "node";
  return buf;
}

}  // namespace

struct NodeServer::Sockets {
  zmq::context_t context{1};
  zmq::socket_t frontend{context, zmq::socket_type::router};
  zmq::socket_t backend{context, zmq::socket_type::dealer};
  zmq::socket_t control_listen{context, zmq::socket_type::pair};
  zmq::socket_t control{context, zmq::socket_type::pair};
  std::string backend_endpoint;
  std::thread proxy;
  std::vector<std::thread> workers;
  std::atomic<bool> stopping{false};
};

Result<std::unique_ptr<NodeServer>> NodeServer::Start(NodeOptions options) {
  if (options.endpoints.empty()) return InvalidArgument("node needs at least one endpoint");
  if (options.workers < 1) return InvalidArgument("node needs at least one worker");
  if (options.node_id.empty()) options.node_id = HostName();
  std::unique_ptr<NodeServer> server(new NodeServer());
  server->options_ = options;
  NodeServer* self = server.get();
  auto storage = storage::StorageManager::Open(options.storage, /*listener=*/nullptr);
  if (!storage.ok()) return storage.status();
  server->storage_ = std::move(*storage);
  server->handler_ = std::make_unique<RequestHandler>(*server->storage_, options.node_id);

  auto sockets = std::make_unique<Sockets>();
  try {
    // A frame past twice the payload limit is cut off by ZeroMQ itself (the
    // peer is disconnected); up to that, the worker answers with kTooLarge.
    sockets->frontend.set(zmq::sockopt::maxmsgsize,
                          static_cast<int64_t>(std::max(options.limits.max_payload_bytes,
                                                        uint64_t{options.limits.max_header_bytes}) * 2));
    sockets->frontend.set(zmq::sockopt::linger, 0);
    sockets->frontend.set(zmq::sockopt::router_mandatory, 0);
    for (const auto& ep : options.endpoints) {
      sockets->frontend.bind(ep);
      server->endpoints_.push_back(sockets->frontend.get(zmq::sockopt::last_endpoint));
    }
  } catch (const zmq::error_t& e) {
    return IoError("bind " + options.endpoints.back() + ": " + e.what());
  }
  sockets->backend_endpoint = "inproc://pikv-workers";
  sockets->backend.bind(sockets->backend_endpoint);
  sockets->control_listen.bind("inproc://pikv-control");
  sockets->control.connect("inproc://pikv-control");
  server->sockets_ = std::move(sockets);

  Sockets* s = server->sockets_.get();
  for (int i = 0; i < options.workers; ++i) {
    s->workers.emplace_back([self, i] { self->WorkerLoop(i); });
  }
  s->proxy = std::thread([s] {
    try {
      zmq::proxy_steerable(s->frontend, s->backend, zmq::socket_ref(), s->control_listen);
    } catch (const zmq::error_t& e) {
      spdlog::error("node proxy stopped: {}", e.what());
    }
  });
  spdlog::info("node {} serving on {} endpoint(s) with {} workers", options.node_id, server->endpoints_.size(),
               options.workers);
  return server;
}

NodeServer::~NodeServer() { Stop(); }

void NodeServer::WorkerLoop(int index) {
  Sockets& s = *sockets_;
  zmq::socket_t socket(s.context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  socket.connect(s.backend_endpoint);
  std::vector<zmq::message_t> frames;
  zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
  while (true) {
    int ready = 0;
    try {
      ready = zmq::poll(&item, 1, std::chrono::milliseconds(50));
    } catch (const zmq::error_t& e) {
      spdlog::error("worker {} poll: {}", index, e.what());
      return;
    }
    if (ready == 0) {
      if (s.stopping) return;
      continue;
    }
    if (!RecvFrames(socket, frames, zmq::recv_flags::dontwait) || frames.empty()) continue;
    // frames[0] is the client's identity (added by the ROUTER).
    std::vector<zmq::message_t> routing;
    routing.push_back(std::move(frames[0]));
    Message reply;
    if (frames.size() < 2) {
      reply = handler_->Reject(nullptr, ProtocolError("message has no header frame"));
    } else {
      auto header = DecodeHeader({static_cast<const uint8_t*>(frames[1].data()), frames[1].size()}, options_.limits);
      if (!header.ok()) {
        reply = handler_->Reject(nullptr, header.status());
      } else {
        std::vector<size_t> sizes;
        for (size_t i = 2; i < frames.size(); ++i) sizes.push_back(frames[i].size());
        if (Status limit = CheckPayloadLimits(sizes, options_.limits); !limit.ok()) {
          reply = handler_->Reject(&*header, limit);
        } else {
          Message request{std::move(*header), {}};
          for (size_t i = 2; i < frames.size(); ++i) request.payloads.push_back(FromFrame(std::move(frames[i])));
          reply = handler_->Handle(request);
        }
      }
    }
    frames.clear();
    if (!SendMessage(socket, routing, reply.header, reply.payloads)) {
      spdlog::warn("worker {}: reply could not be sent", index);
    }
  }
}

void NodeServer::Stop() {
  if (stopped_ || !sockets_) return;
  stopped_ = true;
  Sockets& s = *sockets_;
  // Workers finish what they hold (replies still flow through the proxy).
  s.stopping = true;
  for (auto& w : s.workers) w.join();
  // Then stop the proxy, which closes the endpoints to new requests.
  try {
    s.control.send(zmq::str_buffer("TERMINATE"), zmq::send_flags::none);
  } catch (const zmq::error_t& e) {
    spdlog::error("stopping proxy: {}", e.what());
  }
  if (s.proxy.joinable()) s.proxy.join();
  s.frontend.close();
  s.backend.close();
  s.control.close();
  s.control_listen.close();
  storage_->Shutdown();
  spdlog::info("node {} stopped", options_.node_id);
}

}  // namespace pikv::node
