#include "test_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>

namespace pikv::testing {

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

std::pair<int, std::string> HttpGet(const std::string& address, const std::string& target) {
  const int fd = ConnectLoopback(std::stoi(address.substr(address.rfind(':') + 1)));
  if (fd < 0) return {0, ""};
  const std::string request = "GET " + target + " HTTP/1.1\r\nHost: test\r\n\r\n";
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  std::string answer;
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
      static_cast<ssize_t>(request.size())) {
    char buf[4096];
    for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) answer.append(buf, n);
  }
  close(fd);
  // "HTTP/1.1 200 OK\r\n...\r\n\r\nbody" (the server closes after one response)
  const size_t body = answer.find("\r\n\r\n");
  if (answer.rfind("HTTP/1.1 ", 0) != 0 || body == std::string::npos) return {0, ""};
  return {std::atoi(answer.c_str() + 9), answer.substr(body + 4)};
}

std::string BinaryPath(const std::string& name) { return std::string(PIKV_BIN_DIR) + "/" + name; }

NodeProcess StartNode(const std::vector<std::string>& args,
                      const std::vector<std::string>& prefix) {
  auto node = launch::StartNode(BinaryPath("pikv-node"), args, prefix);
  if (!node.ok()) throw std::runtime_error(node.status().ToString());
  return std::move(*node);
}

NodeProcess StartClusterNode(const TempDir& dir, const std::string& id,
                             const std::string& controller, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"--endpoint",
                                   "tcp://127.0.0.1:*",
                                   "--endpoint",
                                   "ipc://" + dir.str() + "/n.sock",
                                   "--data-dir",
                                   dir.str(),
                                   "--node-id",
                                   id,
                                   "--host",
                                   "host-" + id,
                                   "--controller",
                                   controller,
                                   "--heartbeat-interval",
                                   "100ms",
                                   "--disk",
                                   "false",
                                   "--log-level",
                                   "error"};
  args.insert(args.end(), extra.begin(), extra.end());
  return StartNode(args);
}

ControllerProcess StartController(const std::vector<std::string>& args,
                                  const std::vector<std::string>& prefix) {
  auto c = launch::StartController(BinaryPath("pikv-controller"), args, prefix);
  if (!c.ok()) throw std::runtime_error(c.status().ToString());
  return std::move(*c);
}

void RedisServer::Start() {
  if (Status s = launch::RedisServer::Start(); !s.ok()) throw std::runtime_error(s.ToString());
}

TestObject MakeObject(uint64_t seed, size_t bytes) {
  // f32, one KV head of dim 128: 1 KiB of payload per (layer, token).
  const size_t units = std::max<size_t>(1, bytes / 1024);
  // Up to 256 tokens; more past 256 MiB, where layers would pass their limit.
  const uint32_t tokens =
      static_cast<uint32_t>(std::min<size_t>(units, std::max<size_t>(256, (units + 1023) / 1024)));
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

SharedBuffer Rebuilt(std::span<const uint8_t> object,
                     const std::function<void(ChunkHeader&)>& change) {
  auto h = ParseChunkHeader(object);
  if (!h.ok()) throw std::runtime_error(h.status().ToString());
  ChunkHeader changed = *h;
  change(changed);
  auto payload = ChunkPayload(object, *h);
  std::vector<uint8_t> bytes(payload.begin(), payload.end());
  bytes.resize(changed.geometry.PayloadBytes());
  auto rebuilt = BuildChunkObject(changed, bytes);
  if (!rebuilt.ok()) throw std::runtime_error(rebuilt.status().ToString());
  return SharedBuffer::FromVector(std::move(*rebuilt));
}

TestKeys::TestKeys(const std::vector<std::string>& node_ids) {
  if (Status s = WriteClusterKeys(dir_.str(), node_ids); !s.ok())
    throw std::runtime_error(s.ToString());
}

void TestKeys::AddEngine(const std::string& name, const std::string& tenant) {
  auto pair = NewCurveKeyPair();
  if (!pair.ok()) throw std::runtime_error(pair.status().ToString());
  if (Status s = WriteCurveKeyPair(*pair, dir_.str() + "/" + name); !s.ok())
    throw std::runtime_error(s.ToString());
  std::ofstream(dir_.str() + "/keyring", std::ios::app)
      << "engine " << pair->public_key << " " << name << " " << tenant << "\n";
}

std::vector<std::string> TestKeys::Flags(const std::string& member) const {
  return {"--curve-key", dir_.str() + "/" + member, "--curve-keyring", dir_.str() + "/keyring"};
}

std::vector<std::string> TestKeys::With(const std::string& member,
                                        std::vector<std::string> args) const {
  for (auto& flag : Flags(member)) args.push_back(std::move(flag));
  return args;
}

std::vector<std::string> WithKeys(const std::optional<TestKeys>& keys, const std::string& member,
                                  std::vector<std::string> args) {
  return keys ? keys->With(member, std::move(args)) : args;
}

std::optional<CurveClientKeys> DialKeys(const std::optional<TestKeys>& keys,
                                        const std::string& member, const std::string& node_id) {
  if (!keys) return std::nullopt;
  return keys->Dial(member, node_id);
}

std::shared_ptr<const CurveSecurity> TestKeys::Security(const std::string& member) const {
  auto security = CurveSecurity::Load(dir_.str() + "/" + member, dir_.str() + "/keyring");
  if (!security.ok()) throw std::runtime_error(security.status().ToString());
  return *security;
}

CurveClientKeys TestKeys::Dial(const std::string& member, const std::string& node_id) const {
  auto security = Security(member);
  auto keys = node_id.empty() ? security->ForController() : security->ForNode(node_id);
  if (!keys.ok()) throw std::runtime_error(keys.status().ToString());
  return *keys;
}

}  // namespace pikv::testing
