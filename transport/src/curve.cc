#include "pikv/transport/curve.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "pikv/common/config.h"
#include "pikv/common/guarded_thread.h"
#include "pikv/proto/owner.h"

namespace pikv {

namespace {

constexpr char kZapEndpoint[] = "inproc://zeromq.zap.01";
constexpr size_t kZ85Key = 40;
constexpr size_t kMaxZapFrames = 16;
constexpr int kPollMs = 100;

std::string Trimmed(std::string_view s) {
  const auto begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return "";
  const auto end = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(begin, end - begin + 1));
}

// The words of a keyring line up to its comment: a word that starts with
// '#' begins one, except in the key's place (Z85 keys may hold '#').
std::vector<std::string> Words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) {
    if (w[0] == '#' && words.size() != 1) break;
    words.push_back(std::move(w));
  }
  return words;
}

Status WriteNew(const std::string& path, const std::string& text, mode_t mode) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return IoError("create " + path + ": " + std::strerror(errno));
  const std::string line = text + "\n";
  const bool written = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  const bool closed = close(fd) == 0;
  if (!written || !closed) return IoError("write " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

Result<std::string> ReadKeyFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read key file " + path);
  std::string text(kZ85Key + 16, '\0');  // a key file is one short line
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  std::string key = Trimmed(text);
  if (!IsCurveKey(key)) return InvalidArgument(path + " does not hold a CurveZMQ key");
  return key;
}

// The file's mtime and size, as text; empty when it cannot be read.
std::string FileStamp(const std::string& path) {
  struct stat st {};
  if (path.empty() || stat(path.c_str(), &st) != 0) return "";
  return std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + ":" +
         std::to_string(st.st_size);
}

// Receives every part of one message (at most kMaxZapFrames are kept).
std::vector<std::string> ReceiveParts(void* socket) {
  std::vector<std::string> parts;
  int more = 1;
  while (more) {
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, socket, 0) < 0) {
      zmq_msg_close(&msg);
      break;
    }
    if (parts.size() < kMaxZapFrames)
      parts.emplace_back(static_cast<const char*>(zmq_msg_data(&msg)), zmq_msg_size(&msg));
    more = zmq_msg_more(&msg);
    zmq_msg_close(&msg);
  }
  return parts;
}

}  // namespace

bool IsCurveKey(std::string_view z85) {
  if (z85.size() != kZ85Key) return false;
  const std::string text(z85);
  uint8_t raw[32];
  return zmq_z85_decode(raw, text.c_str()) != nullptr;
}

Result<CurveKeyPair> NewCurveKeyPair() {
  char pub[kZ85Key + 1], sec[kZ85Key + 1];
  if (zmq_curve_keypair(pub, sec) != 0)
    return Unsupported("this libzmq cannot make CURVE keys: " + std::string(zmq_strerror(errno)));
  return CurveKeyPair{pub, sec};
}

Status WriteCurveKeyPair(const CurveKeyPair& keys, const std::string& prefix) {
  if (!IsCurveKey(keys.public_key) || !IsCurveKey(keys.secret_key))
    return InvalidArgument("not a CurveZMQ key pair");
  if (Status s = WriteNew(prefix + ".key", keys.secret_key, 0600); !s.ok()) return s;
  return WriteNew(prefix + ".pub", keys.public_key, 0644);
}

Status WriteClusterKeys(const std::string& dir, const std::vector<std::string>& node_ids) {
  std::vector<std::pair<std::string, std::string>> members = {
      {"controller", "controller"}, {"admin", "admin"}, {"engine", "engine"}};
  for (const auto& id : node_ids) members.emplace_back("node-" + id, "node");
  std::string keyring = "# pikv keyring: <role> <public key> [node id]\n";
  for (const auto& [name, role] : members) {
    auto keys = NewCurveKeyPair();
    if (!keys.ok()) return keys.status();
    if (Status s = WriteCurveKeyPair(*keys, dir + "/" + name); !s.ok()) return s;
    keyring += role + " " + keys->public_key;
    if (role == "node") keyring += " " + name.substr(5);
    keyring += "\n";
  }
  if (auto parsed = CurveKeyring::Parse(keyring); !parsed.ok()) return parsed.status();
  std::string text = keyring;
  text.pop_back();  // WriteNew ends the file with a newline
  return WriteNew(dir + "/keyring", text, 0644);
}

Result<CurveKeyPair> ReadCurveKeyPair(const std::string& prefix) {
  auto pub = ReadKeyFile(prefix + ".pub");
  if (!pub.ok()) return pub.status();
  auto sec = ReadKeyFile(prefix + ".key");
  if (!sec.ok()) return sec.status();
  char derived[kZ85Key + 1];
  if (zmq_curve_public(derived, sec->c_str()) != 0 || *pub != derived)
    return InvalidArgument(prefix + ".pub is not the public key of " + prefix + ".key");
  return CurveKeyPair{std::move(*pub), std::move(*sec)};
}

Result<CurveKeyring> CurveKeyring::Parse(std::string_view text) {
  CurveKeyring list;
  std::istringstream lines{std::string(text)};
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    const std::vector<std::string> words = Words(line);
    if (words.empty()) continue;
    const auto where = "keyring line " + std::to_string(n) + ": ";
    if (Status s = list.AddLine(words); !s.ok()) return InvalidArgument(where + s.message());
  }
  return list;
}

Status CurveKeyring::AddLine(const std::vector<std::string>& words) {
  const std::string& role = words[0];
  if (role == "revoked") {
    if (words.size() != 2 || !IsIdentityName(words[1]))
      return InvalidArgument("'revoked' names one engine");
    revoked_.insert(words[1]);
    return Status::Ok();
  }
  const size_t max_words = role == "engine" ? 4 : 3;
  if (words.size() > max_words) return InvalidArgument("too many words");
  const std::string key = words.size() > 1 ? words[1] : "";
  const std::string third = words.size() > 2 ? words[2] : "";
  if (!IsCurveKey(key)) return InvalidArgument("no CurveZMQ public key");
  CurvePeer peer;
  if (role == "admin") {
    peer.role = Role::kAdmin;
  } else if (role == "engine") {
    peer.role = Role::kEngine;
    if (!third.empty()) peer.name = third;
    if (words.size() > 3) peer.tenant = words[3];
    if (!IsIdentityName(peer.name) || !IsTenantName(peer.tenant))
      return InvalidArgument("an engine's name and tenant are 1..63 of [A-Za-z0-9._-]");
    if (IsReservedName(peer.name) || IsReservedName(peer.tenant))
      return InvalidArgument(
          "'default' and 'unknown' are reserved: no engine or tenant takes them");
    auto [it, added] = tenants_.emplace(peer.name, peer.tenant);
    if (!added && it->second != peer.tenant)
      return InvalidArgument("engine " + peer.name + " is listed in two tenants");
  } else if (role == "node") {
    peer.role = Role::kNode;
    if (third.empty()) return InvalidArgument("a node key names its node id");
    peer.node_id = third;
    if (!node_keys_.emplace(third, key).second)
      return InvalidArgument("node " + third + " is listed twice");
  } else if (role == "controller") {
    peer.role = Role::kController;
    if (!controller_key_.empty()) return InvalidArgument("the controller is listed twice");
    controller_key_ = key;
  } else {
    return InvalidArgument("role '" + role + "' is not controller, node, admin, engine or revoked");
  }
  if (peer.role != Role::kNode && peer.role != Role::kEngine && !third.empty())
    return InvalidArgument("only a node key names a node id");
  if (!peers_.emplace(key, peer).second) return InvalidArgument("the key is listed twice");
  return Status::Ok();
}

std::set<std::string> CurveKeyring::EngineNames() const {
  std::set<std::string> names;
  for (const auto& [name, tenant] : tenants_) names.insert(name);
  return names;
}

bool Revocations::Add(const std::string& name) {
  std::lock_guard lock(mu_);
  const bool added = names_.insert(name).second;
  count_ = names_.size();
  return added;
}

bool Revocations::Contains(const std::string& name) const {
  if (count_.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard lock(mu_);
  return names_.contains(name);
}

std::set<std::string> Revocations::Names() const {
  std::lock_guard lock(mu_);
  return names_;
}

Result<CurveKeyring> CurveKeyring::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read keyring " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return Parse(text.str());
}

const CurvePeer* CurveKeyring::Find(const std::string& public_key) const {
  auto it = peers_.find(public_key);
  return it == peers_.end() ? nullptr : &it->second;
}

const std::string* CurveKeyring::ControllerKey() const {
  return controller_key_.empty() ? nullptr : &controller_key_;
}

const std::string* CurveKeyring::NodeKey(const std::string& node_id) const {
  auto it = node_keys_.find(node_id);
  return it == node_keys_.end() ? nullptr : &it->second;
}

Result<std::shared_ptr<const CurveSecurity>> CurveSecurity::Load(const std::string& key_prefix,
                                                                 const std::string& keyring_path) {
  if (key_prefix.empty() && keyring_path.empty()) return std::shared_ptr<const CurveSecurity>();
  if (key_prefix.empty() || keyring_path.empty())
    return InvalidArgument("security needs both curve-key and curve-keyring");
  auto own = ReadCurveKeyPair(key_prefix);
  if (!own.ok()) return own.status();
  auto keyring = CurveKeyring::Load(keyring_path);
  if (!keyring.ok()) return keyring.status();
  return std::make_shared<const CurveSecurity>(
      CurveSecurity{std::move(*own), std::move(*keyring), keyring_path});
}

Result<CurveClientKeys> CurveSecurity::ForController() const {
  const std::string* server = keyring.ControllerKey();
  if (!server) return NotFound("the keyring lists no controller key");
  return CurveClientKeys{own.public_key, own.secret_key, *server};
}

Result<CurveClientKeys> CurveSecurity::ForNode(const std::string& node_id) const {
  const std::string* server = keyring.NodeKey(node_id);
  if (!server) return NotFound("the keyring lists no key for node '" + node_id + "'");
  return CurveClientKeys{own.public_key, own.secret_key, *server};
}

void DeclareCurveSettings(Config& config) {
  config.Declare("curve-key", Config::Kind::kString, "",
                 "This process's CurveZMQ key pair, PREFIX.pub and PREFIX.key (pikv keygen); with "
                 "curve-keyring it turns security on (docs/security.md)");
  config.Declare("curve-keyring", Config::Kind::kString, "",
                 "The cluster's public keys by role: who may connect, and the servers' keys");
}

Result<std::shared_ptr<const CurveSecurity>> CurveSecurityFrom(const Config& config) {
  return CurveSecurity::Load(config.String("curve-key"), config.String("curve-keyring"));
}

bool UsesCurve(std::string_view endpoint) { return endpoint.starts_with("tcp://"); }

void ServeCurve(void* socket, const CurveSecurity* security) {
  const int on = security ? 1 : 0;
  zmq_setsockopt(socket, ZMQ_CURVE_SERVER, &on, sizeof on);
  if (security) {
    zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, security->own.secret_key.data(),
                   security->own.secret_key.size());
  }
}

void DialCurve(void* socket, const CurveClientKeys& keys) {
  zmq_setsockopt(socket, ZMQ_CURVE_SERVERKEY, keys.server_key.data(), keys.server_key.size());
  zmq_setsockopt(socket, ZMQ_CURVE_PUBLICKEY, keys.public_key.data(), keys.public_key.size());
  zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, keys.secret_key.data(), keys.secret_key.size());
}

const CurvePeer* SenderOf(void* message, std::optional<CurvePeer>& storage) {
  // ZeroMQ gives a message the user id its ZAP reply named; messages from
  // peers no ZAP handler saw (NULL mechanism: ipc, or security off) have none.
  const char* user_id = zmq_msg_gets(static_cast<zmq_msg_t*>(message), "User-Id");
  if (!user_id || !*user_id) return nullptr;
  storage = ParseUserId(user_id);
  // Unreachable (ZAP writes only UserId()s); were it reached, the sender is
  // an engine of a reserved tenant no object may have: it sees nothing.
  if (!storage) {
    const std::string reserved(kUnknownWriter);
    storage = CurvePeer{Role::kEngine, "", reserved, reserved};
  }
  return &*storage;
}

Result<std::unique_ptr<ZapHandler>> ZapHandler::Start(void* zmq_context, CurveKeyring allowed,
                                                      std::shared_ptr<Revocations> revoked,
                                                      std::string keyring_path, ZapLog log) {
  void* socket = zmq_socket(zmq_context, ZMQ_REP);
  if (!socket) return IoError(std::string("ZAP socket: ") + zmq_strerror(errno));
  if (zmq_bind(socket, kZapEndpoint) != 0) {
    Status s = IoError(std::string("bind the ZAP handler: ") + zmq_strerror(errno));
    zmq_close(socket);
    return s;
  }
  std::unique_ptr<ZapHandler> handler(
      new ZapHandler(socket, std::move(allowed), std::move(revoked), std::move(keyring_path)));
  handler->log_ = std::move(log);
  handler->thread_ = EssentialThread("ZAP handler", [h = handler.get()] { h->Serve(); });
  return handler;
}

ZapHandler::ZapHandler(void* socket, CurveKeyring allowed, std::shared_ptr<Revocations> revoked,
                       std::string keyring_path)
    : socket_(socket),
      allowed_(std::move(allowed)),
      revoked_(std::move(revoked)),
      keyring_path_(std::move(keyring_path)) {
  if (revoked_) {
    for (const auto& name : allowed_.revoked()) revoked_->Add(name);
  }
  keyring_stamp_ = FileStamp(keyring_path_);
}

void ZapHandler::Log(const std::string& line) const {
  if (log_) log_(line);
}

void ZapHandler::ReloadIfChanged() {
  const auto now = std::chrono::steady_clock::now();
  if (keyring_path_.empty() || now < next_reload_check_) return;
  next_reload_check_ = now + std::chrono::milliseconds(kReloadCheckMs);
  const std::string stamp = FileStamp(keyring_path_);
  if (stamp.empty() || stamp == keyring_stamp_) return;
  keyring_stamp_ = stamp;
  auto fresh = CurveKeyring::Load(keyring_path_);
  if (!fresh.ok()) {
    Log("keyring " + keyring_path_ +
        " changed but is not valid, the old one stays: " + fresh.status().ToString());
    return;
  }
  std::set<std::string> refused = fresh->revoked();
  const std::set<std::string> listed = fresh->EngineNames();
  for (const auto& name : allowed_.EngineNames()) {
    if (!listed.contains(name)) refused.insert(name);  // its lines are gone
  }
  if (revoked_) {
    for (const auto& name : refused) {
      if (revoked_->Add(name)) Log("keyring " + keyring_path_ + ": engine " + name + " revoked");
    }
  }
  Log("keyring " + keyring_path_ + " reloaded: " + std::to_string(fresh->size()) + " keys");
  allowed_ = std::move(*fresh);
}

ZapHandler::~ZapHandler() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  const int linger = 0;
  zmq_setsockopt(socket_, ZMQ_LINGER, &linger, sizeof linger);
  zmq_close(socket_);
}

void ZapHandler::Serve() {
  while (!stopping_) {
    ReloadIfChanged();
    zmq_pollitem_t item{socket_, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, kPollMs) <= 0) continue;
    const std::vector<std::string> request = ReceiveParts(socket_);
    // Request: version, request id, domain, address, routing id, mechanism,
    // credentials (CURVE: the client's 32-byte public key).
    std::string code = "400", text = "key not allowed", user_id;
    if (request.size() == 7 && request[0] == "1.0" && request[5] == "CURVE" &&
        request[6].size() == 32) {
      char z85[kZ85Key + 1];
      zmq_z85_encode(z85, reinterpret_cast<const uint8_t*>(request[6].data()), 32);
      const CurvePeer* peer = allowed_.Find(z85);
      // Only engines are revoked (other roles keep CurvePeer's default name).
      const bool revoked =
          peer && peer->role == Role::kEngine &&
          (allowed_.revoked().contains(peer->name) || IsRevoked(peer, revoked_.get()));
      if (peer && peer->role != Role::kController &&
          !revoked) {  // a server's key, never a client's
        code = "200";
        text = "OK";
        user_id = peer->UserId();
      }
    }
    (code == "200" ? admitted_ : refused_)++;
    const std::string request_id = request.size() > 1 ? request[1] : "";
    const std::string reply[] = {"1.0", request_id, code, text, user_id, ""};
    for (size_t i = 0; i < 6; ++i)
      zmq_send(socket_, reply[i].data(), reply[i].size(), i + 1 < 6 ? ZMQ_SNDMORE : 0);
  }
}

ZapHandler::Counters ZapHandler::counters() const { return {admitted_, refused_}; }

}  // namespace pikv
