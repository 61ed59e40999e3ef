// Curve: CurveZMQ key pairs, the allow-list of peers' public keys by role,
// and the ZAP handler that admits a CURVE socket's peers by that list.
//
// Built and tested on real sockets, not yet turned on in the node, the
// controller or the clients (issue 14; docs/security.md).
//
// A key pair is two Z85 texts of 40 characters; `pikv keygen PREFIX` writes
// PREFIX.pub (the public key) and PREFIX.key (the secret one, mode 0600).
// An allow-list has one peer per line, `<role> <public key> [node id]`, with
// roles `admin`, `engine` and `node`; a node's line names its id, which binds
// the id to that key. Blank lines and comments (from a `#` that begins a
// word; Z85 keys may hold `#`) are skipped.
// The ZAP handler answers its ZeroMQ context's authentication requests
// (inproc://zeromq.zap.01) for every socket of that context that is a CURVE
// server: a listed key is admitted with user id `admin`, `engine` or
// `node:<id>`, which the server reads from each message it receives (frame
// property "User-Id"; ParseUserId); any other key or mechanism is refused.
// Thread-safety: the handler runs one thread of its own; the rest is pure.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "pikv/common/status.h"

namespace pikv {

struct CurveKeyPair {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;
};

Result<CurveKeyPair> NewCurveKeyPair();
// Writes PREFIX.pub and PREFIX.key; refuses to overwrite either.
Status WriteCurveKeyPair(const CurveKeyPair& keys, const std::string& prefix);
// Reads PREFIX.pub and PREFIX.key and checks they are a pair.
Result<CurveKeyPair> ReadCurveKeyPair(const std::string& prefix);
// True when `z85` is a well-formed CurveZMQ key.
bool IsCurveKey(std::string_view z85);

enum class Role : uint8_t { kAdmin, kEngine, kNode };

struct CurvePeer {
  Role role = Role::kEngine;
  std::string node_id;  // kNode only
  std::string UserId() const;
  friend bool operator==(const CurvePeer&, const CurvePeer&) = default;
};
// The peer a user id names; nullopt for anything UserId does not write.
std::optional<CurvePeer> ParseUserId(std::string_view user_id);

class CurveAllowList {
 public:
  static Result<CurveAllowList> Parse(std::string_view text);
  static Result<CurveAllowList> Load(const std::string& path);
  const CurvePeer* Find(const std::string& public_key) const;
  size_t size() const { return peers_.size(); }

 private:
  std::map<std::string, CurvePeer> peers_;  // by public key
};

class ZapHandler {
 public:
  struct Counters {
    uint64_t admitted = 0, refused = 0;
  };
  // Serves `zmq_context` (a zmq::context_t's handle) until destroyed; start
  // it before any CURVE server socket of that context binds.
  static Result<std::unique_ptr<ZapHandler>> Start(void* zmq_context, CurveAllowList allowed);
  ~ZapHandler();
  Counters counters() const;

 private:
  ZapHandler(void* socket, CurveAllowList allowed);
  void Serve();

  void* socket_;  // REP, bound to the ZAP endpoint; the handler thread's only
  const CurveAllowList allowed_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> admitted_{0}, refused_{0};
  std::thread thread_;
};

}  // namespace pikv
