// The node's data requests as declared types, where they carry more than
// keys and payloads (message.h has the frame; control_wire.h the control
// plane's). The sender encodes one and the node decodes one, so no field is
// named by hand at either end. Decoding never fails; values are checked
// where they are used (a pull's peer is parsed as a tcp endpoint, its
// deadline clamped by the node).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "pikv/proto/message.h"

namespace pikv {

// kPull: the node fetches the request's keys from a peer and admits them.
struct PullRequest {
  // The peer the client's plan named (a tcp endpoint), asked first; empty:
  // wherever the controller says.
  std::string from;
  // The caller's deadline in ms, counted from the request's arrival;
  // nullopt: the node's default.
  std::optional<int64_t> timeout_ms;
  // Reply with per-key codes only: a local client reads the admitted
  // objects in place.
  bool admit_only = false;
  friend bool operator==(const PullRequest&, const PullRequest&) = default;
};
// Into `request`'s fields (its type and keys are the caller's).
void EncodePull(const PullRequest& pull, Header& request);
PullRequest DecodePull(const Header& request);

// kPing's and kStats's replies name the node that answers (a stats reply's
// other fields are its stats, by their names in docs/metrics.md).
void SetAnsweringNode(const std::string& node_id, Header& reply);
std::string AnsweringNode(const Header& reply);

}  // namespace pikv
