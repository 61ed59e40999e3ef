#include "pikv/proto/data_wire.h"

#include <limits>

namespace pikv {

namespace {

constexpr char kFrom[] = "from", kTimeoutMs[] = "timeout_ms", kAdmitOnly[] = "admit_only",
               kNodeId[] = "node_id";

}  // namespace

void EncodePull(const PullRequest& pull, Header& request) {
  request.fields[kFrom] = pull.from;
  if (pull.timeout_ms) request.fields[kTimeoutMs] = *pull.timeout_ms;
  if (pull.admit_only) request.fields[kAdmitOnly] = int64_t{1};
}

PullRequest DecodePull(const Header& request) {
  PullRequest pull;
  pull.from = FieldString(request.fields, kFrom);
  // Absent, or not a number: the node's default.
  constexpr int64_t kNone = std::numeric_limits<int64_t>::min();
  if (const int64_t ms = FieldInt(request.fields, kTimeoutMs, kNone); ms != kNone)
    pull.timeout_ms = ms;
  pull.admit_only = FieldInt(request.fields, kAdmitOnly, 0) != 0;
  return pull;
}

void SetAnsweringNode(const std::string& node_id, Header& reply) {
  reply.fields[kNodeId] = node_id;
}

std::string AnsweringNode(const Header& reply) { return FieldString(reply.fields, kNodeId); }

}  // namespace pikv
