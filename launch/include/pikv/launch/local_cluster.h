// LocalCluster: a whole pikv cluster on this machine (a controller, nodes on
// loopback tcp and ipc, and Redis), as `pikv demo` and `pikv cluster` run
// it. Every process is a child that dies with this one; the destructor stops
// them with SIGTERM.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "pikv/launch/daemons.h"

namespace pikv::launch {

struct LocalClusterOptions {
  int nodes = 3;
  std::string redis = "auto";  // auto (start one if redis-server is installed), off, or host:port
  std::string bin_dir;         // where the daemons are; empty: FindDaemon's search
  std::chrono::milliseconds ready_timeout{10000};  // until every node is alive at the controller
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

  const ControllerProcess& controller() const { return controller_; }
  const std::vector<NodeProcess>& nodes() const { return nodes_; }
  const std::string& redis_address() const { return redis_address_; }
  std::string NodeId(size_t i) const { return "node-" + std::to_string(i + 1); }
  std::string NodeHost(size_t i) const { return "host-" + NodeId(i); }
  std::string Pids() const;  // every process started, for the operator

 private:
  Status StartAll(const LocalClusterOptions& options);
  Status WaitAlive(size_t n, std::chrono::milliseconds timeout);

  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<RedisServer> redis_;
  std::string redis_address_;
  ControllerProcess controller_;
  std::vector<NodeProcess> nodes_;
};

}  // namespace pikv::launch
