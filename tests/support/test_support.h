// Helpers shared by pikv's tests and benchmarks: temp dirs, free ports, child
// processes, a real redis-server, a real pikv-node, and chunk objects of a
// chosen size. No gtest here: failures to start a process throw.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pikv/proto/chunk_object.h"
#include "pikv/proto/shared_buffer.h"

namespace pikv::testing {

// A fresh directory under $TMPDIR, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// A loopback TCP port nobody listens on right now.
int FreePort();

// A TCP connection to 127.0.0.1:port (a blocking fd), or -1.
int ConnectLoopback(int port);

// Where built binaries live (set by CMake as PIKV_BIN_DIR).
std::string BinaryPath(const std::string& name);

// A child process with its stdout captured line by line. It dies with its
// parent (PR_SET_PDEATHSIG), also when the parent is killed or times out,
// and leads its own process group, which the destructor kills.
class ChildProcess {
 public:
  ChildProcess(const std::string& program, const std::vector<std::string>& args);
  ~ChildProcess();  // SIGKILL if still running
  pid_t pid() const { return pid_; }
  // Next stdout line, or nullopt on EOF / timeout.
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout);
  void Signal(int sig);
  // Exit status (or 128+signal); nullopt if it did not exit in time.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  bool Running();

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string buffer_;
  std::optional<int> status_;
};

// A pikv-node child process, started and ready: its endpoints are parsed
// from the "endpoint <url>" lines it prints.
struct NodeProcess {
  std::unique_ptr<ChildProcess> process;
  std::string tcp;
  std::string ipc;
  std::string http;  // host:port when started with --http
};
// `prefix` runs the binary under another command (e.g. ip netns exec NS).
NodeProcess StartNode(const std::vector<std::string>& args,
                      const std::vector<std::string>& prefix = {});

// A pikv-controller child process, ready, with its endpoints parsed.
struct ControllerProcess {
  std::unique_ptr<ChildProcess> process;
  std::string endpoint;
  std::string http;  // host:port, empty when off
};
ControllerProcess StartController(const std::vector<std::string>& args,
                                  const std::vector<std::string>& prefix = {});

// A real redis-server on a free loopback port, persisted nowhere.
class RedisServer {
 public:
  RedisServer();  // starts it; throws if it does not come up
  ~RedisServer();
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string unix_socket() const { return dir_.str() + "/redis.sock"; }
  void Kill();   // SIGKILL
  void Start();  // again, on the same port
  void Pause();  // SIGSTOP: connections hang instead of failing
  void Resume();
  static bool Available();
  pid_t pid() const { return process_ ? process_->pid() : -1; }

 private:
  int port_;
  TempDir dir_;
  std::unique_ptr<ChildProcess> process_;
};

// A valid chunk object whose total size is close to `bytes` (at least 1 KiB),
// with a payload derived from `seed`.
struct TestObject {
  ChunkKey key;
  SharedBuffer bytes;
};
TestObject MakeObject(uint64_t seed, size_t bytes);

}  // namespace pikv::testing
