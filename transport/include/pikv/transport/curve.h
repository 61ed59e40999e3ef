// Curve: CurveZMQ key pairs, the cluster's keyring (every process's public
// key by role), the ZAP handler that admits a CURVE server's peers by that
// keyring, and the socket settings both ends use (docs/security.md).
//
// A key pair is two Z85 texts of 40 characters; `pikv keygen PREFIX` writes
// PREFIX.pub (the public key) and PREFIX.key (the secret one, mode 0600).
// A keyring has one process per line, `<role> <public key> [node id]`, with
// roles `controller` (one), `node` (naming its id, once each: that binds the
// id to the key), `admin` and `engine`. An engine line may name the engine
// and its tenant, `engine <public key> [name [tenant]]` (proto/owner.h
// names; an engine without a name is "engine", without a tenant in the
// default one; a name has one tenant, and may have several keys, as when a
// key is rotated). `revoked <name>` refuses that engine's keys. Blank lines
// and comments (from a word that starts with `#`; a Z85 key may hold `#`,
// and is never read as one) are skipped. It holds no secret:
// every process of a cluster gets the same file. Servers admit the keys of
// the client roles (admin, engine, node); clients find there the public key
// of the server they dial (the controller's, or a node's by its id).
//
// Security applies to tcp endpoints. An ipc endpoint is a unix socket only
// the server's own user can open (its mode is 0600): such a peer is already
// as trusted as the server (it could ptrace it), so ipc carries no CURVE and
// its messages have no user id (SenderOf: nullptr, the trusted sender).
//
// The ZAP handler answers its ZeroMQ context's authentication requests
// (inproc://zeromq.zap.01) for every socket of that context that is a CURVE
// server: a listed client key is admitted with user id `admin`,
// `engine:<name>@<tenant>` or `node:<id>`, which the server reads from each
// message (SenderOf); any other key or mechanism, and a revoked engine's
// key, is refused. It must run before such a socket binds: without a
// handler, ZeroMQ lets every CURVE client in. Given the keyring's path, it
// reads the file again when it changes (revocations and new keys take
// effect without a restart; an engine whose lines are gone is revoked).
// Revocations: the engines refused from now on, shared by the handler and
// the server (which refuses a revoked engine's messages on connections made
// before), fed by the keyring and by `pikv admin revoke`.
// Thread-safety: the handler runs one thread of its own; Revocations is
// thread-safe; the rest is pure.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "pikv/common/status.h"
#include "pikv/proto/peer.h"

namespace pikv {

class Config;

struct CurveKeyPair {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;
};

Result<CurveKeyPair> NewCurveKeyPair();
// Writes PREFIX.pub and PREFIX.key; refuses to overwrite either.
Status WriteCurveKeyPair(const CurveKeyPair& keys, const std::string& prefix);
// Reads PREFIX.pub and PREFIX.key and checks they are a pair.
Result<CurveKeyPair> ReadCurveKeyPair(const std::string& prefix);
// A new cluster's keys in `dir` (which must exist): controller, admin,
// engine and node-<id> for each of `node_ids` (pairs, as WriteCurveKeyPair
// writes them), and `keyring` listing them all. Refuses to overwrite any.
Status WriteClusterKeys(const std::string& dir, const std::vector<std::string>& node_ids);
// True when `z85` is a well-formed CurveZMQ key.
bool IsCurveKey(std::string_view z85);

class CurveKeyring {
 public:
  static Result<CurveKeyring> Parse(std::string_view text);
  static Result<CurveKeyring> Load(const std::string& path);
  const CurvePeer* Find(const std::string& public_key) const;
  // The server keys a client dials; nullptr when the keyring has none.
  const std::string* ControllerKey() const;
  const std::string* NodeKey(const std::string& node_id) const;
  size_t size() const { return peers_.size(); }
  // Engine names listed (with a key), and those listed as revoked.
  std::set<std::string> EngineNames() const;
  const std::set<std::string>& revoked() const { return revoked_; }

 private:
  Status AddLine(const std::vector<std::string>& words);

  std::map<std::string, CurvePeer> peers_;      // by public key
  std::map<std::string, std::string> tenants_;  // engine name -> its tenant
  std::set<std::string> revoked_;
  std::map<std::string, std::string> node_keys_;  // node id -> public key
  std::string controller_key_;
};

// What a client socket needs to dial a CURVE server.
struct CurveClientKeys {
  std::string public_key, secret_key;
  std::string server_key;  // the server's public key
};

// One process's security settings: its own key pair and the cluster's
// keyring (config: curve-key PREFIX, curve-keyring FILE).
struct CurveSecurity {
  CurveKeyPair own;
  CurveKeyring keyring;
  std::string keyring_path;  // where it was read (reloaded by the ZAP handler)

  // Both empty: null, security off; one without the other is an error.
  static Result<std::shared_ptr<const CurveSecurity>> Load(const std::string& key_prefix,
                                                           const std::string& keyring_path);
  // The keys to dial the controller, or node `node_id`; an error naming
  // what the keyring lacks.
  Result<CurveClientKeys> ForController() const;
  Result<CurveClientKeys> ForNode(const std::string& node_id) const;
};

// Engines refused from now on, by name (thread-safe).
class Revocations {
 public:
  // True when `name` was not revoked before.
  bool Add(const std::string& name);
  bool Contains(const std::string& name) const;
  std::set<std::string> Names() const;

 private:
  mutable std::mutex mu_;
  std::set<std::string> names_;   // guarded by mu_
  std::atomic<size_t> count_{0};  // lets Contains skip the lock while there are none
};
// Whether `sender` is an engine that was revoked.
inline bool IsRevoked(const CurvePeer* sender, const Revocations* revoked) {
  return sender && revoked && sender->role == Role::kEngine && revoked->Contains(sender->name);
}

// The settings that turn security on, the same in every process (daemons
// and clients): curve-key and curve-keyring; and CurveSecurity::Load of them.
void DeclareCurveSettings(Config& config);
Result<std::shared_ptr<const CurveSecurity>> CurveSecurityFrom(const Config& config);

// Whether security applies to `endpoint` (tcp; not ipc or inproc).
bool UsesCurve(std::string_view endpoint);
// Socket settings (`socket`: a ZeroMQ socket handle), set before bind or
// connect; ZeroMQ keeps what was set at each bind, so one socket may bind
// ipc without CURVE and then tcp with it. ServeCurve(socket, nullptr) turns
// the server side off again.
void ServeCurve(void* socket, const CurveSecurity* security);
void DialCurve(void* socket, const CurveClientKeys& keys);

// The CURVE peer that sent a received message (`message`: a zmq_msg_t*, the
// first frame the peer sent), or nullptr for the trusted sender: security
// off, or an ipc peer. `storage` holds the peer.
const CurvePeer* SenderOf(void* message, std::optional<CurvePeer>& storage);
// Where the ZAP handler says what a keyring reload did (transport does not log).
using ZapLog = std::function<void(const std::string& line)>;

class ZapHandler {
 public:
  struct Counters {
    uint64_t admitted = 0, refused = 0;
  };
  // Serves `zmq_context` (a zmq::context_t's handle) until destroyed; start
  // it before any CURVE server socket of that context binds. `revoked`
  // (may be null) gets the keyring's revocations; with `keyring_path` the
  // file is read again whenever it changes.
  static Result<std::unique_ptr<ZapHandler>> Start(void* zmq_context, CurveKeyring allowed,
                                                   std::shared_ptr<Revocations> revoked = nullptr,
                                                   std::string keyring_path = "",
                                                   ZapLog log = nullptr);
  ~ZapHandler();
  Counters counters() const;
  // How often the keyring file is looked at for changes.
  static constexpr int kReloadCheckMs = 500;

 private:
  ZapHandler(void* socket, CurveKeyring allowed, std::shared_ptr<Revocations> revoked,
             std::string keyring_path);
  void Serve();
  // Reads the keyring again when its file changed; the handler thread's.
  void ReloadIfChanged();
  void Log(const std::string& line) const;

  void* socket_;          // REP, bound to the ZAP endpoint; the handler thread's only
  CurveKeyring allowed_;  // the handler thread's
  const std::shared_ptr<Revocations> revoked_;
  const std::string keyring_path_;
  ZapLog log_;                 // set before the thread starts
  std::string keyring_stamp_;  // the file's mtime and size when last read
  std::chrono::steady_clock::time_point next_reload_check_{};
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> admitted_{0}, refused_{0};
  std::thread thread_;
};

}  // namespace pikv
