// Finding and starting pikv's daemons (and a Redis for them) as child
// processes. A daemon is ready when it has printed its endpoints and its
// "... ready" line; one that exits or stays silent for 20 s is an error.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pikv/common/status.h"
#include "pikv/launch/process.h"

namespace pikv::launch {

// Where the executable `name` (pikv-node, pikv-controller) is: in `bin_dir`
// when one is given, else next to the running executable, else on PATH.
Result<std::string> FindDaemon(const std::string& name, const std::string& bin_dir = {});

// `name` in a directory of PATH, as a shell would find it.
std::optional<std::string> FindOnPath(const std::string& name);

struct NodeProcess {
  std::unique_ptr<ChildProcess> process;
  std::string tcp;
  std::string ipc;
  std::string http;      // host:port when started with --http
  std::string id;        // its --node-id, when the starter set one
  std::string data_dir;  // its --data-dir, when the starter set one
};
struct ControllerProcess {
  std::unique_ptr<ChildProcess> process;
  std::string endpoint;
  std::string http;  // host:port, empty when off
};

// `prefix` runs the binary under another command (e.g. ip netns exec NS).
Result<NodeProcess> StartNode(const std::string& binary, const std::vector<std::string>& args,
                              const std::vector<std::string>& prefix = {});
Result<ControllerProcess> StartController(const std::string& binary,
                                          const std::vector<std::string>& args,
                                          const std::vector<std::string>& prefix = {});

// A real redis-server on a free loopback port (and a unix socket), persisted
// nowhere. Construction starts nothing; Start() does, on the same port each
// time.
class RedisServer {
 public:
  RedisServer();
  ~RedisServer();
  static bool Available();  // redis-server is on PATH
  Status Start();
  void Kill();   // SIGKILL
  void Pause();  // SIGSTOP: connections hang instead of failing
  void Resume();
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string unix_socket() const { return dir_.str() + "/redis.sock"; }
  pid_t pid() const { return process_ ? process_->pid() : -1; }

 private:
  int port_;
  TempDir dir_;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace pikv::launch
