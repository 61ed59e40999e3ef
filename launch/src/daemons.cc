#include "pikv/launch/daemons.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <sstream>
#include <thread>

namespace pikv::launch {

namespace {

namespace fs = std::filesystem;

constexpr auto kReadyTimeout = std::chrono::seconds(20);

bool IsExecutable(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && access(p.c_str(), X_OK) == 0;
}

std::unique_ptr<ChildProcess> Spawn(const std::string& binary, const std::vector<std::string>& args,
                                    const std::vector<std::string>& prefix) {
  if (prefix.empty()) return std::make_unique<ChildProcess>(binary, args);
  std::vector<std::string> rest(prefix.begin() + 1, prefix.end());
  rest.push_back(binary);
  rest.insert(rest.end(), args.begin(), args.end());
  return std::make_unique<ChildProcess>(prefix.front(), rest);
}

// Starts `binary` and hands its stdout lines to `ready` until that returns
// true. A daemon that cannot start, exits or stays silent is an error saying
// which, with its exit status.
Status SpawnUntilReady(const std::string& binary, const std::vector<std::string>& args,
                       const std::vector<std::string>& prefix,
                       std::unique_ptr<ChildProcess>& process,
                       const std::function<bool(const std::string&)>& ready) {
  try {
    process = Spawn(binary, args, prefix);
  } catch (const std::exception& e) {
    return Unavailable(binary + ": " + e.what());
  }
  while (auto line = process->ReadLine(kReadyTimeout)) {
    if (ready(*line)) return Status::Ok();
  }
  const auto status = process->Wait(std::chrono::milliseconds(200));
  if (!status) return Timeout(binary + " did not report ready within 20 s");
  return Unavailable(binary + " exited with status " + std::to_string(*status) +
                     " before it was ready (see its log above)");
}

bool PortAccepts(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

}  // namespace

// `name` in a directory of PATH, as a shell would find it.
std::optional<std::string> FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty() && IsExecutable(fs::path(dir) / name)) return (fs::path(dir) / name).string();
  }
  return std::nullopt;
}

Result<std::string> FindDaemon(const std::string& name, const std::string& bin_dir) {
  if (!bin_dir.empty()) {
    const fs::path p = fs::path(bin_dir) / name;
    if (IsExecutable(p)) return p.string();
    return NotFound(name + " is not an executable in " + bin_dir);
  }
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && IsExecutable(self.parent_path() / name)) return (self.parent_path() / name).string();
  if (auto on_path = FindOnPath(name)) return *on_path;
  return NotFound(name + " was found neither next to " +
                  (ec ? std::string("this program") : self.string()) +
                  " nor on PATH (give its directory with --bin-dir)");
}

Result<NodeProcess> StartNode(const std::string& binary, const std::vector<std::string>& args,
                              const std::vector<std::string>& prefix) {
  NodeProcess node;
  // The node prints one "endpoint <url>" line per endpoint, then "... ready".
  Status s = SpawnUntilReady(binary, args, prefix, node.process, [&](const std::string& line) {
    if (line.rfind("endpoint tcp://", 0) == 0) node.tcp = line.substr(9);
    if (line.rfind("endpoint ipc://", 0) == 0) node.ipc = line.substr(9);
    if (line.rfind("http ", 0) == 0) node.http = line.substr(5);
    return line.ends_with(" ready");
  });
  if (!s.ok()) return s;
  return node;
}

Result<ControllerProcess> StartController(const std::string& binary,
                                          const std::vector<std::string>& args,
                                          const std::vector<std::string>& prefix) {
  ControllerProcess c;
  Status s = SpawnUntilReady(binary, args, prefix, c.process, [&](const std::string& line) {
    if (line.rfind("endpoint ", 0) == 0) c.endpoint = line.substr(9);
    if (line.rfind("http ", 0) == 0) c.http = line.substr(5);
    return line == "pikv-controller ready";
  });
  if (!s.ok()) return s;
  return c;
}

bool RedisServer::Available() { return FindOnPath("redis-server").has_value(); }

RedisServer::RedisServer() : port_(FreePort()) {}

RedisServer::~RedisServer() { Kill(); }

void RedisServer::Kill() {
  if (!process_) return;
  process_->Signal(SIGKILL);
  process_->Wait(std::chrono::seconds(5));
  process_.reset();
}

void RedisServer::Pause() {
  if (process_) process_->Signal(SIGSTOP);
}
void RedisServer::Resume() {
  if (process_) process_->Signal(SIGCONT);
}

Status RedisServer::Start() {
  if (port_ == 0) return Unavailable("no free loopback port for redis-server");
  try {
    process_ = std::make_unique<ChildProcess>("redis-server",
                                              std::vector<std::string>{"--port",
                                                                       std::to_string(port_),
                                                                       "--bind",
                                                                       "127.0.0.1",
                                                                       "--save",
                                                                       "",
                                                                       "--appendonly",
                                                                       "no",
                                                                       "--dir",
                                                                       dir_.str(),
                                                                       "--logfile",
                                                                       "",
                                                                       "--loglevel",
                                                                       "warning",
                                                                       "--proto-max-bulk-len",
                                                                       "1gb",
                                                                       "--unixsocket",
                                                                       unix_socket(),
                                                                       "--unixsocketperm",
                                                                       "700"});
  } catch (const std::exception& e) {
    return Unavailable(std::string("redis-server: ") + e.what());
  }
  // Ready when the port accepts connections.
  for (int i = 0; i < 500; ++i) {
    if (PortAccepts(port_)) return Status::Ok();
    if (!process_->Running()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Kill();
  return Unavailable("redis-server did not start on port " + std::to_string(port_));
}

}  // namespace pikv::launch
