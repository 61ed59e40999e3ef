#include "channels.h"

#include "pikv/transport/controller_finder.h"
#include "pikv/transport/local_channel.h"

namespace pikv::client {

namespace {

// A channel that failed is tried again after this long.
constexpr auto kZeroCopyRetry = std::chrono::seconds(1);

}  // namespace

std::optional<CurveClientKeys> CurveFor(const ClientOptions& o, const std::string& endpoint,
                                        const std::string* node_id) {
  if (!o.security || !UsesCurve(endpoint)) return std::nullopt;
  auto keys = node_id ? o.security->ForNode(*node_id) : o.security->ForController();
  if (!keys.ok()) return std::nullopt;
  return std::move(*keys);
}

Status CheckClientSecurity(const ClientOptions& o) {
  if (!o.security) return Status::Ok();
  if (UsesCurve(o.local_node)) {
    if (o.local_node_id.empty())
      return InvalidArgument("security on with a tcp local node needs local-node-id");
    if (auto keys = o.security->ForNode(o.local_node_id); !keys.ok()) return keys.status();
  }
  if (DialsTcp(o.controller)) {
    if (auto keys = o.security->ForController(); !keys.ok()) return keys.status();
  }
  return Status::Ok();
}

Channels::Channels(const ClientOptions& options) : options_(options) {
  if (!options_.local_node.empty()) {
    local_ = std::make_unique<rpc::NodeClient>(
        options_.local_node, options_.node_timeout, WireLimits{},
        CurveFor(options_, options_.local_node, &options_.local_node_id));
    local_->set_stream_frame(options_.stream_frame);
    if (options_.zero_copy) zero_copy_path_ = ZeroCopySocketFor(options_.local_node);
  }
  if (!options_.controller.empty()) {
    // A list or etcd:// spec names tcp controllers: CURVE when security is on.
    std::optional<CurveClientKeys> curve;
    if (options_.security && DialsTcp(options_.controller)) {
      if (auto keys = options_.security->ForController(); keys.ok()) curve = std::move(*keys);
    }
    const FindControllersFn find =
        options_.find_controllers ? options_.find_controllers : &ControllerFinder::Parse;
    auto finder = find(options_.controller);  // thread-safe: both connections follow it
    controller_ = std::make_unique<rpc::AdminClient>(finder, options_.controller_timeout, curve);
    locator_ = std::make_unique<Locator>(
        std::make_unique<rpc::AdminClient>(std::move(finder), options_.controller_timeout,
                                           std::move(curve)),
        options_.host);
  }
}

rpc::NodeClient& Channels::Peer(const std::string& endpoint, const std::string& peer_id,
                                std::chrono::milliseconds timeout) {
  auto& peer = peers_[endpoint];
  if (!peer) {
    peer = std::make_unique<rpc::NodeClient>(endpoint, timeout, WireLimits{},
                                             CurveFor(options_, endpoint, &peer_id));
    peer->set_stream_frame(options_.stream_frame);
  }
  return *peer;
}

void Channels::DropPeer(const std::string& endpoint) { peers_.erase(endpoint); }

std::shared_ptr<rpc::ZeroCopyClient> Channels::ZeroCopy() {
  if (zero_copy_path_.empty()) return nullptr;
  if (zero_copy_ && zero_copy_->healthy()) return zero_copy_;
  zero_copy_.reset();
  const auto now = std::chrono::steady_clock::now();
  if (now < zero_copy_retry_) return nullptr;
  auto connected = rpc::ZeroCopyClient::Connect(zero_copy_path_, options_.node_timeout);
  if (!connected.ok()) {
    zero_copy_retry_ = now + kZeroCopyRetry;  // copies meanwhile
    return nullptr;
  }
  zero_copy_ = std::move(*connected);
  return zero_copy_;
}

std::function<Status()> Channels::PutOnItsOwn(ChunkKey key, SharedBuffer object) const {
  return [endpoint = options_.local_node, timeout = options_.node_timeout,
          curve = CurveFor(options_, options_.local_node, &options_.local_node_id),
          stream_frame = options_.stream_frame, key, object = std::move(object)]() -> Status {
    rpc::NodeClient node(endpoint, timeout, WireLimits{}, curve);
    node.set_stream_frame(stream_frame);
    auto put = node.Put({&key, 1}, {&object, 1});
    return put.ok() ? (*put)[0] : put.status();
  };
}

}  // namespace pikv::client
