#include "pikv/node/node_server.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "inbound_streams.h"
#include "node_stats_sources.h"
#include "pikv/common/guarded_thread.h"
#include "pikv/coord/find_controllers.h"
#include "pikv/http/http_server.h"
#include "pikv/node/node_metrics.h"
#include "pikv/node/node_stats.h"
#include "pikv/node/revocation_sweeper.h"
#include "pikv/proto/endpoint.h"
#include "pikv/proto/permissions.h"
#include "pikv/transport/local_channel.h"
#include "pikv/transport/zmq_frames.h"
#include "zero_copy_server.h"

namespace pikv::node {

namespace {

// The controller spec, checked: each listed endpoint is tcp (etcd:// names
// its leader at run time).
Result<std::shared_ptr<ControllerFinder>> FinderOf(const std::string& spec) {
  auto finder = coord::FindControllers(spec);
  if (!finder.ok()) return InvalidArgument("controller: " + finder.status().message());
  for (const auto& endpoint : (*finder)->listed()) {
    if (auto ep = ParseTcpEndpoint(endpoint); !ep.ok())
      return InvalidArgument("controller: " + ep.status().message());
  }
  return finder;
}

using Clock = std::chrono::steady_clock;
constexpr char kRepliesEndpoint[] = "inproc://pikv-node-replies";
constexpr char kPullRepliesEndpoint[] = "inproc://pikv-node-pull-replies";
constexpr auto kDrainTimeout = std::chrono::seconds(30);

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "node";
  return buf;
}

// What peers should dial for a bound tcp endpoint: a wildcard bind
// (tcp://0.0.0.0:7400) is advertised under the node's host name.
std::string AdvertisedTcp(const std::string& bound, const std::string& host) {
  auto e = ParseTcpEndpoint(bound);
  if (!e.ok() || !IsWildcardHost(e->host)) return bound;
  e->host = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return e->ToString();
}

}  // namespace

// A request waiting for a worker.
struct Job {
  zmq::message_t identity;
  Message request;
  Clock::time_point received;
  Caller caller;
};

// Hand-off from the server thread to the workers, bounded by the server's
// in-flight counts (max_in_flight, max_pulls_in_flight).
class JobQueue {
 public:
  void Push(Job job) {
    {
      std::lock_guard lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }
  // Blocks for a job; nullopt once closed and empty.
  std::optional<Job> Pop() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return closed_ || !jobs_.empty(); });
    if (jobs_.empty()) return std::nullopt;
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    return job;
  }
  void Close() {
    {
      std::lock_guard lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;  // guarded by mu_
  bool closed_ = false;   // guarded by mu_
};

struct NodeServer::Loop {
  zmq::context_t context{1};
  std::unique_ptr<ZapHandler> zap;  // outlives the frontend it admits peers to
  zmq::socket_t frontend{context, zmq::socket_type::router};
  zmq::socket_t replies{context, zmq::socket_type::pull};
  zmq::socket_t pull_replies{context, zmq::socket_type::pull};
  JobQueue jobs;   // local work: disk and Redis reads, puts, deletes
  JobQueue pulls;  // P2P pulls, on threads of their own so they never hold up local work
  // Owned by the server thread: requests handed to workers / pull workers
  // and not yet answered.
  size_t in_flight = 0;
  size_t pulls_in_flight = 0;
  std::thread server;
  std::vector<std::thread> workers;
  std::vector<std::thread> pull_workers;
  std::unique_ptr<http::Server> http;
  std::unique_ptr<InboundStreams> inbound;  // the server thread's alone
  std::atomic<bool> draining{false};
};

namespace {

// Everything about the options that can be checked before anything starts;
// fills in the node's id and the reporter's leader finder.
Status Prepare(NodeOptions& options) {
  if (options.endpoints.empty()) return InvalidArgument("node needs at least one endpoint");
  if (options.workers < 1) return InvalidArgument("node needs at least one worker");
  if (options.max_in_flight < 1) return InvalidArgument("node needs max_in_flight >= 1");
  if (options.pull_workers < 1 || options.max_pulls_in_flight < 1)
    return InvalidArgument("node needs pull_workers and max_pulls_in_flight >= 1");
  if (options.pull_stream_frame != 0 && (options.pull_stream_frame < uint64_t{kMinStreamFrame} ||
                                         options.pull_stream_frame > uint64_t{kMaxStreamFrame}))
    return InvalidArgument("pull stream frame: 0 (off) or " + std::to_string(kMinStreamFrame) +
                           " to " + std::to_string(kMaxStreamFrame) + " bytes");
  if (auto s = CheckNodeId(options.node_id.empty() ? HostName() : options.node_id); !s.ok())
    return s;
  if (!IsTenantName(options.tenant) || IsReservedName(options.tenant))
    return InvalidArgument(
        "tenant: empty (the default one) or 1..63 of [A-Za-z0-9._-] other than 'default' and "
        "'unknown'");
  if (options.reporter) {
    auto finder = FinderOf(options.reporter->controller);
    if (!finder.ok()) return finder.status();
    options.reporter->finder = std::move(*finder);
  }
  if (options.node_id.empty()) options.node_id = HostName();
  if (options.security && options.reporter) {
    if (auto keys = options.security->ForController(); !keys.ok()) return keys.status();
  }
  if (options.security && !options.security->keyring.NodeKey(options.node_id))
    return InvalidArgument("the keyring lists no key for this node, " + options.node_id);
  if (options.security &&
      *options.security->keyring.NodeKey(options.node_id) != options.security->own.public_key)
    return InvalidArgument("the keyring lists another key for node " + options.node_id);
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<NodeServer>> NodeServer::Start(NodeOptions options) {
  if (Status s = Prepare(options); !s.ok()) return s;
  std::unique_ptr<NodeServer> server(new NodeServer());
  server->options_ = options;
  storage::EventListener listener;
  if (options.reporter) {
    server->events_ = std::make_unique<EventQueue>(options.reporter->queue_capacity);
    listener = [q = server->events_.get()](std::span<const storage::TierEvent> ev) { q->Push(ev); };
  }
  auto storage = storage::StorageManager::Open(options.storage, std::move(listener));
  if (!storage.ok()) return storage.status();
  server->storage_ = std::move(*storage);
  PullOptions pull;
  if (options.reporter) pull.controller = options.reporter->finder;
  pull.stream_frame_bytes = options.pull_stream_frame;
  pull.security = options.security;
  server->handler_ =
      std::make_unique<RequestHandler>(*server->storage_, options.node_id, std::move(pull));

  auto loop = std::make_unique<Loop>();
  if (Status s = server->Bind(*loop); !s.ok()) return s;
  loop->inbound = std::make_unique<InboundStreams>(*server->storage_, options.limits);
  server->AddStatsSources(*loop);
  server->loop_ = std::move(loop);
  if (Status s = server->StartZeroCopy(); !s.ok()) return s;
  if (options.reporter) server->StartReporter();
  if (Status s = server->StartHttp(); !s.ok()) return s;
  server->StartThreads();
  spdlog::info("node {} serving on {} endpoint(s) with {} workers ({})", options.node_id,
               server->endpoints_.size(), options.workers,
               options.security ? "CURVE on tcp" : "security off");
  return server;
}

Status NodeServer::Bind(Loop& loop) {
  const NodeOptions& options = options_;
  if (options.security) {
    auto zap = ZapHandler::Start(loop.context.handle(), options.security->keyring, revoked_,
                                 options.security->keyring_path,
                                 [](const std::string& line) { spdlog::warn("node: {}", line); });
    if (!zap.ok()) return zap.status();
    loop.zap = std::move(*zap);
  }
  try {
    // A frame past twice the payload limit is cut off by ZeroMQ itself (the
    // peer is disconnected); up to that, the server answers kTooLarge.
    loop.frontend.set(zmq::sockopt::maxmsgsize,
                      static_cast<int64_t>(std::max(options.limits.max_payload_bytes,
                                                    uint64_t{options.limits.max_header_bytes}) *
                                           2));
    loop.frontend.set(zmq::sockopt::linger, 0);
    loop.frontend.set(zmq::sockopt::rcvhwm, 16);
    // A streamed reply is many messages (slices of arena objects, no copies):
    // room for the largest one, or a ROUTER would drop its tail.
    loop.frontend.set(zmq::sockopt::sndhwm,
                      static_cast<int>(2 * RequestHandler::kMaxStreamMessages));
    for (const auto& ep : options.endpoints) {
      // ZeroMQ takes the mechanism at bind: CURVE for tcp, none for ipc,
      // whose socket only this user may open (curve.h).
      ServeCurve(loop.frontend.handle(), UsesCurve(ep) ? options.security.get() : nullptr);
      loop.frontend.bind(ep);
      endpoints_.push_back(loop.frontend.get(zmq::sockopt::last_endpoint));
      if (const std::string& bound = endpoints_.back(); bound.starts_with("ipc://"))
        chmod(bound.substr(6).c_str(), 0600);
    }
    loop.replies.bind(kRepliesEndpoint);
    loop.pull_replies.bind(kPullRepliesEndpoint);
  } catch (const zmq::error_t& e) {
    return IoError("bind " + options.endpoints.back() + ": " + e.what());
  }
  return Status::Ok();
}

void NodeServer::AddStatsSources(Loop& loop) {
  StatsRegistry& registry = handler_->stats();
  registry.AddSource([this](StatsSink& out) {
    out.Add(stats::kTrust, "revocations", revocations_);
    out.Add(stats::kTrust, "revoked_objects", revoked_objects_);
    out.Add(stats::kTrust, "revoked_refused", revoked_refused_);
    out.Add(stats::kTrust, "owner_table_refusals", OwnerTableRefusals());
  });
  AddInboundSource(registry, *loop.inbound);
  AddReporterSource(registry, reporter_);
}

void NodeServer::StartReporter() {
  ReporterOptions r = *options_.reporter;
  r.security = options_.security;
  r.on_revoke = [this](const std::string& engine, bool shared_tier) {
    Revoke(engine, shared_tier);
  };
  if (r.node_id.empty()) r.node_id = options_.node_id;
  if (r.host.empty()) r.host = HostName();
  for (const auto& ep : endpoints_) {
    if (r.tcp.empty() && ep.rfind("tcp://", 0) == 0) r.tcp = AdvertisedTcp(ep, r.host);
    if (r.ipc.empty() && ep.rfind("ipc://", 0) == 0) r.ipc = ep;
  }
  const uint64_t disk = options_.storage.disk ? options_.storage.disk->capacity_bytes : 0;
  reporter_ = std::make_unique<Reporter>(r, *events_, *storage_, *handler_,
                                         options_.storage.cpu.capacity_bytes, disk);
  reporter_->Start();
}

Status NodeServer::StartHttp() {
  if (options_.http.empty()) return Status::Ok();
  std::map<std::string, http::Handler> routes;
  routes["/metrics"] = [this](const http::Request&) {
    return http::Response{200, "text/plain; version=0.0.4", NodeMetricsText(*handler_)};
  };
  routes["/healthz"] = [this](const http::Request&) {
    const bool registered = reporter_ && reporter_->registered();
    const auto cpu = storage_->Stats().tiers[static_cast<int>(TierKind::kCpu)];
    return http::Response{200, "application/json",
                          NodeHealthJson(options_.node_id, registered, reporter_ != nullptr,
                                         cpu.value_or(storage::TierStats{}))};
  };
  auto http = http::Server::Start({options_.http}, std::move(routes));
  if (!http.ok()) return http.status();
  http_address_ = (*http)->address();
  loop_->http = std::move(*http);
  return Status::Ok();
}

void NodeServer::StartThreads() {
  for (int i = 0; i < options_.workers; ++i) {
    // A worker gone would leave its requests in flight, unanswered: essential.
    loop_->workers.push_back(EssentialThread("node worker " + std::to_string(i), [this, i] {
      WorkerLoop(loop_->jobs, kRepliesEndpoint, i);
    }));
  }
  for (int i = 0; i < options_.pull_workers; ++i) {
    loop_->pull_workers.push_back(EssentialThread("pull worker " + std::to_string(i), [this, i] {
      WorkerLoop(loop_->pulls, kPullRepliesEndpoint, i);
    }));
  }
  // A failure of the loop is logged and the node stops serving, visibly.
  loop_->server = GuardedThread("node server", [this] { ServeLoop(); });
}

NodeServer::NodeServer()
    : sweeper_(
          std::make_unique<RevocationSweeper>([this](const std::string& engine, bool shared_tier) {
            return Sweep(engine, shared_tier);
          })) {}

NodeServer::~NodeServer() { Stop(); }

const std::string& NodeServer::zero_copy_path() const {
  static const std::string kNone;
  return zero_copy_ ? zero_copy_->path() : kNone;
}

Status NodeServer::StartZeroCopy() {
  ZeroCopyOptions z = options_.zero_copy;
  if (!z.enabled) return Status::Ok();
  z.identity = {options_.tenant, ""};
  for (size_t i = 0; z.path.empty() && i < endpoints_.size(); ++i)
    z.path = ZeroCopySocketFor(endpoints_[i]);
  if (z.path.empty()) return Status::Ok();  // no ipc endpoint: no local clients to lend to
  auto server = ZeroCopyServer::Start(z, *storage_, options_.limits);
  if (!server.ok()) return server.status();
  zero_copy_ = std::move(*server);
  AddZeroCopySource(handler_->stats(), *zero_copy_);
  spdlog::info("node {} lends its CPU arena to local clients on {}", options_.node_id, z.path);
  return Status::Ok();
}

std::optional<Message> NodeServer::Dispatch(std::vector<zmq::message_t>& frames) {
  // frames[0] is the client's identity (added by the ROUTER), then the header.
  if (frames.size() < 2)
    return handler_->Reject(nullptr, ProtocolError("message has no header frame"));
  auto header = DecodeHeader({static_cast<const uint8_t*>(frames[1].data()), frames[1].size()},
                             options_.limits);
  if (!header.ok()) return handler_->Reject(nullptr, header.status());
  std::vector<size_t> sizes;
  for (size_t i = 2; i < frames.size(); ++i) sizes.push_back(frames[i].size());
  if (Status limit = CheckPayloadLimits(sizes, options_.limits); !limit.ok())
    return handler_->Reject(&*header, limit);
  std::optional<CurvePeer> peer_storage;
  const CurvePeer* sender = SenderOf(frames[1].handle(), peer_storage);
  if (IsRevoked(sender, revoked_.get())) {
    revoked_refused_++;
    spdlog::warn("node: refused {} from revoked engine {}", MsgTypeName(header->type),
                 sender->name);
    return handler_->Reject(&*header, PermissionDenied("engine " + sender->name + " is revoked"));
  }
  if (Status allowed = Authorize(Server::kNode, sender, *header); !allowed.ok()) {
    spdlog::warn("node: refused {} from {}: {}", MsgTypeName(header->type),
                 sender ? sender->UserId() : "a trusted peer", allowed.message());
    return handler_->Reject(&*header, allowed);
  }
  Message request{std::move(*header), {}};
  for (size_t i = 2; i < frames.size(); ++i)
    request.payloads.push_back(FromFrame(std::move(frames[i])));
  const Caller caller = CallerOf(sender, request.header.type);
  const auto t0 = Clock::now();
  if (auto reply = handler_->TryHandleInline(request, caller)) {
    handler_->RecordLatency(request.header.type, Clock::now() - t0);
    return reply;
  }
  if (request.header.type == MsgType::kPut && HasStreamFrame(request.header)) {
    if (!request.payloads.empty())
      return handler_->Reject(&request.header,
                              InvalidArgument("a streamed put sends its bytes after the reply"));
    const std::string peer(static_cast<const char*>(frames[0].data()), frames[0].size());
    handler_->RecordLatency(request.header.type, Clock::now() - t0);
    return loop_->inbound->Start(peer, request.header, t0, caller.engine);
  }
  if (PermissionFor(Server::kNode, request.header.type)->pool ==
      Pool::kPull) {  // authorized: listed
    // Pulls wait on other machines: they get their own threads and their own
    // bound, and a full pull queue is an immediate "busy", never a stall.
    if (loop_->pulls_in_flight >= static_cast<size_t>(options_.max_pulls_in_flight)) {
      return handler_->Reject(&request.header,
                              Status(ErrorCode::kRetry, "node busy: too many pulls in flight"));
    }
    loop_->pulls_in_flight++;
    loop_->pulls.Push(Job{std::move(frames[0]), std::move(request), t0, caller});
    return std::nullopt;
  }
  loop_->in_flight++;
  loop_->jobs.Push(Job{std::move(frames[0]), std::move(request), t0, caller});
  return std::nullopt;
}

void NodeServer::Revoke(const std::string& engine, bool shared_tier) {
  if (revoked_->Add(engine)) revocations_++;
  sweeper_->Request(engine, shared_tier);
}

bool NodeServer::Sweep(const std::string& engine, bool shared_tier) {
  const auto dropped = storage_->DropWrittenBy(engine, shared_tier);
  const uint64_t total = dropped.cpu + dropped.disk + dropped.remote;
  revoked_objects_ += total;
  spdlog::warn(
      "node {}: engine {} revoked: dropped {} objects it wrote (cpu {}, disk {}, remote {}{}){}",
      options_.node_id, engine, total, dropped.cpu, dropped.disk, dropped.remote,
      shared_tier ? ": Redis swept" : ": this node's own copies; another node sweeps Redis",
      dropped.remote_error.ok() ? "" : "; Redis: " + dropped.remote_error.ToString());
  return dropped.remote_error.ok();
}

Caller NodeServer::CallerOf(const CurvePeer* sender, MsgType type) const {
  if (!sender) return Caller{storage::PutIdentity{options_.tenant, ""}};
  if (const std::string* tenant = TenantScope(Server::kNode, sender, type))
    return Caller{storage::PutIdentity{*tenant, sender->name}};
  return Caller{};  // admins, nodes, and what touches no tenant's data
}

void NodeServer::ServeLoop() {
  Loop& l = *loop_;
  std::vector<zmq::message_t> frames;
  std::vector<zmq::message_t> routing(1);
  Clock::time_point drain_deadline{};
  zmq::pollitem_t items[] = {{l.frontend.handle(), 0, ZMQ_POLLIN, 0},
                             {l.replies.handle(), 0, ZMQ_POLLIN, 0},
                             {l.pull_replies.handle(), 0, ZMQ_POLLIN, 0}};
  // Worker replies are complete multipart messages: forward them as they are.
  auto forward = [&](zmq::socket_t& from, size_t& counter) {
    while (RecvFrames(from, frames, zmq::recv_flags::dontwait)) {
      for (size_t i = 0; i < frames.size(); ++i) {
        l.frontend.send(frames[i],
                        i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
      }
      counter--;
    }
  };
  while (true) {
    const size_t in_flight = l.in_flight + l.pulls_in_flight;
    if (l.draining) {
      if (drain_deadline == Clock::time_point{}) drain_deadline = Clock::now() + kDrainTimeout;
      if (in_flight == 0) break;
      if (Clock::now() > drain_deadline) {
        spdlog::warn("node stopping with {} request(s) unanswered", in_flight);
        break;
      }
    }
    // Read new requests unless stopping or the local workers are saturated.
    items[0].events =
        !l.draining && l.in_flight < static_cast<size_t>(options_.max_in_flight) ? ZMQ_POLLIN : 0;
    try {
      zmq::poll(items, 3, std::chrono::milliseconds(50));
    } catch (const zmq::error_t& e) {
      spdlog::error("node poll: {}", e.what());
      return;
    }
    if (items[1].revents & ZMQ_POLLIN) forward(l.replies, l.in_flight);
    if (items[2].revents & ZMQ_POLLIN) forward(l.pull_replies, l.pulls_in_flight);
    if (l.inbound->active() > 0) l.inbound->ExpireStalled(Clock::now());
    if ((items[0].revents & ZMQ_POLLIN) &&
        RecvFrames(l.frontend, frames, zmq::recv_flags::dontwait)) {
      routing[0] = std::move(frames[0]);
      std::optional<Message> reply;
      const std::string peer =
          l.inbound->active() > 0
              ? std::string(static_cast<const char*>(routing[0].data()), routing[0].size())
              : std::string();
      if (!peer.empty() && l.inbound->Receiving(peer)) {  // a frame of its streamed put
        std::span<const uint8_t> bytes;
        if (frames.size() == 2)
          bytes = {static_cast<const uint8_t*>(frames[1].data()), frames[1].size()};
        reply = l.inbound->Accept(peer, frames.size() - 1, bytes, Clock::now());
      } else {
        frames[0] = zmq::message_t(routing[0].data(),
                                   routing[0].size());  // Dispatch may keep it for a worker
        reply = Dispatch(frames);
      }
      if (reply) {
        if (!SendReply(l.frontend, routing, reply->header, reply->payloads))
          spdlog::warn("reply could not be sent");
      }
      frames.clear();
    }
  }
}

void NodeServer::WorkerLoop(JobQueue& jobs, const char* replies, int index) {
  Loop& l = *loop_;
  zmq::socket_t out(l.context, zmq::socket_type::push);
  out.set(zmq::sockopt::linger, 0);
  out.connect(replies);
  std::vector<zmq::message_t> routing(1);
  while (auto job = jobs.Pop()) {
    const auto t0 = Clock::now();
    Message reply;
    try {
      reply = handler_->Handle(job->request, job->received, job->caller);
    } catch (const std::exception& e) {
      // A bug, not a peer's doing; the requester still gets its answer.
      spdlog::error("worker {}: {} request failed: {}", index,
                    MsgTypeName(job->request.header.type), e.what());
      reply.header = ReplyTo(job->request.header, ErrorCode::kInternal, "internal error");
    }
    handler_->RecordLatency(job->request.header.type, Clock::now() - t0);
    job->request.payloads.clear();  // release request frames before replying
    routing[0] = std::move(job->identity);
    if (!SendMessage(out, routing, reply.header, reply.payloads))
      spdlog::warn("worker {}: reply lost", index);
  }
}

void NodeServer::Stop() {
  if (stopped_ || !loop_) return;
  stopped_ = true;
  Loop& l = *loop_;
  l.draining = true;  // the server thread answers what is in flight, then exits
  if (l.server.joinable()) l.server.join();
  l.jobs.Close();
  l.pulls.Close();
  for (auto& w : l.workers) w.join();
  for (auto& w : l.pull_workers) w.join();
  if (l.http) l.http->Stop();
  // Unfinished streams free their space before storage stops; the object
  // stays, its counters read by the reporter's heartbeats until it stops.
  l.inbound->EndAll();
  if (zero_copy_) zero_copy_->Stop();  // clients' leases end before storage does
  l.frontend.close();
  l.replies.close();
  l.pull_replies.close();
  if (reporter_) reporter_->Stop();  // sends what is queued, then deregisters
  sweeper_.reset();                  // ends after the sweep under way
  storage_->Shutdown();
  spdlog::info("node {} stopped", options_.node_id);
}

}  // namespace pikv::node
