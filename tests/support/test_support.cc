#include "test_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <thread>

namespace pikv::testing {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/pikv-test-XXXXXX";
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

int ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

std::string BinaryPath(const std::string& name) { return std::string(PIKV_BIN_DIR) + "/" + name; }

ChildProcess::ChildProcess(const std::string& program, const std::vector<std::string>& args) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    // Dies with its parent, however the parent ends (timeout, crash, kill),
    // and leads a process group of its own, so that whatever it starts can
    // be killed with it.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl
    setpgid(0, 0);
    dup2(pipe_fds[1], STDOUT_FILENO);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(program.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(program.c_str(), argv.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  out_fd_ = pipe_fds[0];
}

ChildProcess::~ChildProcess() {
  if (Running()) {
    Signal(SIGKILL);
    Wait(std::chrono::seconds(5));
  }
  if (pid_ > 0) kill(-pid_, SIGKILL);  // anything it started that is still around
  if (out_fd_ >= 0) close(out_fd_);
}

std::optional<std::string> ChildProcess::ReadLine(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd pfd{out_fd_, POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(left.count())) <= 0) return std::nullopt;
    char buf[4096];
    ssize_t n = read(out_fd_, buf, sizeof buf);
    if (n <= 0) return std::nullopt;
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

void ChildProcess::Signal(int sig) {
  if (pid_ > 0 && !status_) kill(pid_, sig);
}

std::optional<int> ChildProcess::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!status_) {
    int raw = 0;
    pid_t r = waitpid(pid_, &raw, WNOHANG);
    if (r == pid_) {
      status_ = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status_;
}

bool ChildProcess::Running() { return pid_ > 0 && !Wait(std::chrono::milliseconds(0)).has_value(); }

namespace {

std::unique_ptr<ChildProcess> Spawn(const std::string& binary, const std::vector<std::string>& args,
                                    const std::vector<std::string>& prefix) {
  if (prefix.empty()) return std::make_unique<ChildProcess>(binary, args);
  std::vector<std::string> rest(prefix.begin() + 1, prefix.end());
  rest.push_back(binary);
  rest.insert(rest.end(), args.begin(), args.end());
  return std::make_unique<ChildProcess>(prefix.front(), rest);
}

}  // namespace

NodeProcess StartNode(const std::vector<std::string>& args,
                      const std::vector<std::string>& prefix) {
  NodeProcess node;
  node.process = Spawn(BinaryPath("pikv-node"), args, prefix);
  // The node prints one "endpoint <url>" line per endpoint, then "... ready".
  while (auto line = node.process->ReadLine(std::chrono::seconds(20))) {
    if (line->rfind("endpoint tcp://", 0) == 0) node.tcp = line->substr(9);
    if (line->rfind("endpoint ipc://", 0) == 0) node.ipc = line->substr(9);
    if (line->rfind("http ", 0) == 0) node.http = line->substr(5);
    if (line->ends_with(" ready")) return node;
  }
  throw std::runtime_error("pikv-node did not report ready");
}

ControllerProcess StartController(const std::vector<std::string>& args,
                                  const std::vector<std::string>& prefix) {
  ControllerProcess c;
  c.process = Spawn(BinaryPath("pikv-controller"), args, prefix);
  while (auto line = c.process->ReadLine(std::chrono::seconds(20))) {
    if (line->rfind("endpoint ", 0) == 0) c.endpoint = line->substr(9);
    if (line->rfind("http ", 0) == 0) c.http = line->substr(5);
    if (*line == "pikv-controller ready") return c;
  }
  throw std::runtime_error("pikv-controller did not report ready");
}

bool RedisServer::Available() {
  return std::system("command -v redis-server >/dev/null 2>&1") == 0;
}

RedisServer::RedisServer() : port_(FreePort()) { Start(); }

RedisServer::~RedisServer() { Kill(); }

void RedisServer::Kill() {
  if (!process_) return;
  process_->Signal(SIGKILL);
  process_->Wait(std::chrono::seconds(5));
  process_.reset();
}

void RedisServer::Pause() { process_->Signal(SIGSTOP); }
void RedisServer::Resume() { process_->Signal(SIGCONT); }

void RedisServer::Start() {
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
  // Ready when the port accepts connections.
  for (int i = 0; i < 500; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    close(fd);
    if (ok) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  throw std::runtime_error("redis-server did not start on port " + std::to_string(port_));
}

TestObject MakeObject(uint64_t seed, size_t bytes) {
  // f32, one KV head of dim 128: 1 KiB of payload per (layer, token).
  const size_t units = std::max<size_t>(1, bytes / 1024);
  const uint32_t tokens = static_cast<uint32_t>(std::min<size_t>(units, 256));
  const uint32_t layers = static_cast<uint32_t>(std::max<size_t>(1, units / tokens));
  ChunkHeader h;
  h.model_id = "test-model";
  h.geometry = {layers, tokens, 1, 128, DType::kF32, KvFormat::kStandard};
  h.rotary_dim = 128;
  h.rope_spec = "neox;rotary_dim=128;theta=10000";
  for (uint32_t t = 0; t < tokens; ++t) h.tokens.push_back(static_cast<int32_t>(seed * 7919 + t));
  KeyNamespace ns{"test-model", KvFormat::kStandard,      DType::kF32,
                  h.rope_spec,  AttentionMode::kIsolated, {}};
  h.key = MakeChunkKey(ns, h.tokens);
  std::vector<uint8_t> payload(h.geometry.PayloadBytes());
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i + 8 <= payload.size(); i += 8) {
    uint64_t v = rng();
    std::memcpy(payload.data() + i, &v, 8);
  }
  auto obj = BuildChunkObject(h, payload);
  if (!obj.ok()) throw std::runtime_error(obj.status().ToString());
  return {h.key, SharedBuffer::FromVector(std::move(*obj))};
}

}  // namespace pikv::testing
