// Helpers shared by pikv's tests and benchmarks: the launch library's temp
// dirs, ports and child processes; pikv-node, pikv-controller and
// redis-server started from the build tree; chunk objects of a chosen size.
// No gtest here: failures to start a process throw.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pikv/launch/daemons.h"
#include "pikv/launch/process.h"
#include "pikv/proto/chunk_object.h"
#include "pikv/proto/shared_buffer.h"
#include "pikv/transport/curve.h"

namespace pikv::testing {

using launch::ChildProcess;
using launch::ControllerProcess;
using launch::FreePort;
using launch::NodeProcess;
using launch::TempDir;

// A TCP connection to 127.0.0.1:port (a blocking fd), or -1.
int ConnectLoopback(int port);
// GET `target` (a path and query) from a loopback HTTP endpoint
// ("127.0.0.1:port"): the status code and body; {0, ""} when it cannot.
std::pair<int, std::string> HttpGet(const std::string& address, const std::string& target);

// Where built binaries live (set by CMake as PIKV_BIN_DIR).
std::string BinaryPath(const std::string& name);

// The build tree's pikv-node / pikv-controller, started and ready (throws
// otherwise). `prefix` runs the binary under another command (e.g. ip netns
// exec NS).
NodeProcess StartNode(const std::vector<std::string>& args,
                      const std::vector<std::string>& prefix = {});
// A node of a cluster, CPU tier only, for the big-object tests and
// benchmarks: tcp and ipc endpoints (ipc in `dir`), id `id` on host
// "host-<id>", reporting to `controller` every 100 ms; `extra` flags last.
NodeProcess StartClusterNode(const TempDir& dir, const std::string& id,
                             const std::string& controller,
                             const std::vector<std::string>& extra = {});

ControllerProcess StartController(const std::vector<std::string>& args,
                                  const std::vector<std::string>& prefix = {});

// A real redis-server, started by the constructor; Start() again after Kill()
// reuses the port. Both throw when it does not come up.
class RedisServer : public launch::RedisServer {
 public:
  RedisServer() { Start(); }
  void Start();
};

// A valid chunk object whose total size is close to `bytes` (at least 1 KiB),
// with a payload derived from `seed`.
struct TestObject {
  ChunkKey key;
  SharedBuffer bytes;
};
TestObject MakeObject(uint64_t seed, size_t bytes);

// `object` rebuilt (checksums valid) with `change` applied to its header;
// the key is left as it was unless `change` sets it. The payload is kept
// when its size still fits the header, else zeros of the new size.
SharedBuffer Rebuilt(std::span<const uint8_t> object,
                     const std::function<void(ChunkHeader&)>& change);

// A test cluster's keys for security on (WriteClusterKeys in a temp dir):
// members are controller, admin, engine and node-<id> for each node id.
class TestKeys {
 public:
  explicit TestKeys(const std::vector<std::string>& node_ids);
  // A key pair for engine `name` of `tenant`, listed in the keyring
  // (`engine <key> <name> <tenant>`); Security(name) dials with it.
  void AddEngine(const std::string& name, const std::string& tenant);
  // The daemon flags that run `member` with its keys.
  std::vector<std::string> Flags(const std::string& member) const;
  // `args` and those flags.
  std::vector<std::string> With(const std::string& member, std::vector<std::string> args) const;
  std::shared_ptr<const CurveSecurity> Security(const std::string& member) const;
  // `member`'s keys to dial the controller, or node `node_id`.
  CurveClientKeys Dial(const std::string& member, const std::string& node_id = "") const;

 private:
  TempDir dir_;
};

// For fixtures that run with security on and off (`keys` empty: off): a
// daemon's args with `member`'s key flags, and `member`'s keys to dial the
// controller or node `node_id`; nothing added when off.
std::vector<std::string> WithKeys(const std::optional<TestKeys>& keys, const std::string& member,
                                  std::vector<std::string> args);
std::optional<CurveClientKeys> DialKeys(const std::optional<TestKeys>& keys,
                                        const std::string& member, const std::string& node_id = "");

}  // namespace pikv::testing
