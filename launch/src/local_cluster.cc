#include "pikv/launch/local_cluster.h"

#include <signal.h>

#include <filesystem>
#include <thread>

#include "pikv/coord/find_controllers.h"
#include "pikv/rpc/admin_client.h"

namespace pikv::launch {

using namespace std::chrono_literals;

LocalCluster::~LocalCluster() {
  for (auto& n : nodes_) n.process->Signal(SIGTERM);
  for (auto& n : nodes_) n.process->Wait(10s);
  for (auto& c : controllers_) c.process->Signal(SIGTERM);
  for (auto& c : controllers_) c.process->Wait(10s);
}

std::string LocalCluster::controller_spec() const {
  if (etcd_) return etcd_->Spec();
  return controllers_.empty() ? std::string() : controllers_.front().endpoint;
}

Status LocalCluster::Start(const LocalClusterOptions& options) {
  if (options.nodes < 1 || options.nodes > 64) return InvalidArgument("--nodes must be 1..64");
  if (options.controllers < 1 || options.controllers > 5)
    return InvalidArgument("--controllers must be 1..5");
  if (options.controllers > 1 && !EtcdCluster::Available())
    return Unavailable("standby controllers need etcd (apt-get install etcd-server)");
  // Nothing below may throw past this boundary: a launcher reports, it does not abort.
  try {
    return StartAll(options);
  } catch (const std::exception& e) {
    return Unavailable(std::string("local cluster: ") + e.what());
  }
}

Status LocalCluster::StartAll(const LocalClusterOptions& o) {
  auto controller_bin = FindDaemon("pikv-controller", o.bin_dir);
  if (!controller_bin.ok()) return controller_bin.status();
  auto node_bin = FindDaemon("pikv-node", o.bin_dir);
  if (!node_bin.ok()) return node_bin.status();
  dir_ = std::make_unique<TempDir>();

  if (o.redis == "auto" && RedisServer::Available()) {
    redis_ = std::make_unique<RedisServer>();
    if (Status s = redis_->Start(); !s.ok()) return s;
    redis_address_ = redis_->address();
  } else if (o.redis != "auto" && o.redis != "off") {
    redis_address_ = o.redis;
  }

  std::vector<std::string> controller_args = {"--endpoint",  "tcp://127.0.0.1:*", "--http",
                                              "127.0.0.1:0", "--log-level",       "error"};
  if (o.secure) {
    key_dir_ = dir_->str() + "/keys";
    std::filesystem::create_directories(key_dir_);
    std::vector<std::string> ids;
    for (int i = 0; i < o.nodes; ++i) ids.push_back(NodeId(i));
    if (Status s = WriteClusterKeys(key_dir_, ids); !s.ok()) return s;
    controller_args.insert(controller_args.end(), {"--curve-key", key_dir_ + "/controller",
                                                   "--curve-keyring", key_dir_ + "/keyring"});
  }
  if (o.controllers > 1) {
    etcd_ = std::make_unique<EtcdCluster>(3);
    if (Status s = etcd_->Start(); !s.ok()) return s;
    for (const auto& a : etcd_->ControllerArgs()) controller_args.push_back(a);
  }
  for (int c = 0; c < o.controllers; ++c) {
    auto controller = StartController(*controller_bin, controller_args);
    if (!controller.ok()) return controller.status();
    controllers_.push_back(std::move(*controller));
  }

  for (int i = 0; i < o.nodes; ++i) {
    const std::string data_dir = dir_->str() + "/" + NodeId(i);
    std::filesystem::create_directories(data_dir);
    std::vector<std::string> args = {"--endpoint",
                                     "tcp://127.0.0.1:*",
                                     "--endpoint",
                                     "ipc://" + data_dir + "/node.sock",
                                     "--data-dir",
                                     data_dir,
                                     "--node-id",
                                     NodeId(i),
                                     "--host",
                                     NodeHost(i),
                                     "--controller",
                                     controller_spec(),
                                     "--http",
                                     "127.0.0.1:0",
                                     "--heartbeat-interval",
                                     "200ms",
                                     "--cpu-capacity",
                                     o.cpu_capacity,
                                     "--disk-capacity",
                                     "1GiB",
                                     "--log-level",
                                     "error"};
    if (!redis_address_.empty()) args.insert(args.end(), {"--redis", redis_address_});
    if (o.secure) {
      args.insert(args.end(), {"--curve-key", key_dir_ + "/node-" + NodeId(i), "--curve-keyring",
                               key_dir_ + "/keyring"});
    }
    auto node = StartNode(*node_bin, args);
    if (!node.ok()) return node.status();
    node->id = NodeId(i);
    node->data_dir = data_dir;
    nodes_.push_back(std::move(*node));
  }
  return WaitAlive(nodes_.size(), o.ready_timeout);
}

Status LocalCluster::WaitAlive(size_t n, std::chrono::milliseconds timeout) {
  std::optional<CurveClientKeys> keys;
  if (auto security = Security("admin")) keys = *security->ForController();
  rpc::AdminClient admin(coord::FindControllers(controller_spec()), 1s, keys);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto health = admin.Health();
    if (health.ok() && health->nodes_alive == n) return Status::Ok();
    std::this_thread::sleep_for(25ms);
  }
  return Timeout("the controller did not see " + std::to_string(n) + " nodes alive within " +
                 std::to_string(timeout.count()) + " ms");
}

std::shared_ptr<const CurveSecurity> LocalCluster::Security(const std::string& member) const {
  if (key_dir_.empty()) return nullptr;
  auto security = CurveSecurity::Load(key_dir_ + "/" + member, key_dir_ + "/keyring");
  return security.ok() ? *security : nullptr;
}

std::string LocalCluster::Pids() const {
  std::string s;
  for (const auto& c : controllers_) s += (s.empty() ? "" : " ") + std::to_string(c.process->pid());
  for (const auto& n : nodes_) s += " " + std::to_string(n.process->pid());
  if (redis_) s += " " + std::to_string(redis_->pid());
  return s;
}

}  // namespace pikv::launch
