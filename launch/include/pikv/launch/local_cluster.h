// LocalCluster: a whole pikv cluster on this machine (a controller, nodes on
// loopback tcp and ipc, and Redis), as `pikv demo` and `pikv cluster` run
// it; with several controllers, a local 3-member etcd cluster elects their
// leader and the nodes follow it by etcd:// (docs/operations.md). Every
// process is a child that dies with this one; the destructor stops them
// with SIGTERM.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "pikv/launch/daemons.h"
#include "pikv/launch/etcd.h"
#include "pikv/transport/curve.h"

namespace pikv::launch {

struct LocalClusterOptions {
  int nodes = 3;
  std::string redis = "auto";  // auto (start one if redis-server is installed), off, or host:port
  std::string bin_dir;         // where the daemons are; empty: FindDaemon's search
  std::chrono::milliseconds ready_timeout{10000};  // until every node is alive at the controller
  // CURVE on every tcp socket, with keys made for this cluster in its
  // directory (WriteClusterKeys); false: security off.
  bool secure = true;
  std::string cpu_capacity = "256MiB";  // each node's CPU tier
  int controllers = 1;                  // more than one: standbys, elected on a local etcd cluster
};

class LocalCluster {
 public:
  LocalCluster() = default;
  ~LocalCluster();
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // Starts everything and waits until the controller sees every node alive.
  // A daemon that cannot be found, fails or does not come up is an error
  // naming it; what was started is stopped again by the destructor.
  Status Start(const LocalClusterOptions& options);

  // The first controller (the only one, unless standbys were asked for).
  const ControllerProcess& controller() const { return controllers_.front(); }
  const std::vector<ControllerProcess>& controllers() const { return controllers_; }
  // What clients dial: the controller's endpoint, or etcd://... with standbys.
  std::string controller_spec() const;
  const std::vector<NodeProcess>& nodes() const { return nodes_; }
  const std::string& redis_address() const { return redis_address_; }
  pid_t redis_pid() const { return redis_ ? redis_->pid() : -1; }  // -1: none started here
  const EtcdCluster* etcd() const { return etcd_.get(); }          // null without standbys
  std::string data_dir() const { return dir_ ? dir_->str() : std::string(); }
  std::string NodeId(size_t i) const { return "node-" + std::to_string(i + 1); }
  std::string NodeHost(size_t i) const { return "host-" + NodeId(i); }
  std::string Pids() const;  // every process started, for the operator
  // Where the keys are (keyring and key pairs), empty when not secure.
  std::string key_dir() const { return key_dir_; }
  // The settings of a client playing `member` (admin, engine or node-<id>);
  // null when not secure.
  std::shared_ptr<const CurveSecurity> Security(const std::string& member) const;

 private:
  Status StartAll(const LocalClusterOptions& options);
  Status WaitAlive(size_t n, std::chrono::milliseconds timeout);

  std::unique_ptr<TempDir> dir_;
  std::string key_dir_;
  std::unique_ptr<RedisServer> redis_;
  std::string redis_address_;
  std::unique_ptr<EtcdCluster> etcd_;  // with standbys
  std::vector<ControllerProcess> controllers_;
  std::vector<NodeProcess> nodes_;
};

}  // namespace pikv::launch
