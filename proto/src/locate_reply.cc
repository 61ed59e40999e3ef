#include "pikv/proto/locate_reply.h"

namespace pikv {

namespace {
constexpr char kFilling[] = "filling";
std::string NodePrefix(uint16_t index) { return "n" + std::to_string(index) + "."; }
}  // namespace

void MarkRegistryFilling(Header& reply) { reply.fields[kFilling] = int64_t{1}; }

bool RegistryFilling(const Header& reply) { return FieldInt(reply.fields, kFilling) != 0; }

void LocateReplyEncoder::AddKey(std::span<const Replica> copies) {
  reply_.values.push_back(static_cast<int64_t>(copies.size()));
  for (const Replica& r : copies) {
    reply_.values.push_back(r.location.Code());
    nodes_[r.location.node] = &r;
  }
}

void LocateReplyEncoder::Finish() {
  for (const auto& [index, r] : nodes_) {
    const std::string p = NodePrefix(index);
    reply_.fields[p + "id"] = r->node_id;
    reply_.fields[p + "host"] = r->host;
    reply_.fields[p + "tcp"] = r->tcp;
    reply_.fields[p + "ipc"] = r->ipc;
  }
}

Result<std::vector<std::vector<Replica>>> DecodeLocateReply(const Header& h, size_t keys) {
  std::vector<std::vector<Replica>> out(keys);
  size_t v = 0;
  for (size_t k = 0; k < keys; ++k) {
    if (v >= h.values.size()) return ProtocolError("locate reply is short");
    const int64_t n = h.values[v++];
    if (n < 0 || static_cast<uint64_t>(n) > h.values.size() - v)
      return ProtocolError("locate reply is malformed");
    for (int64_t i = 0; i < n; ++i) {
      const int64_t code = h.values[v++];
      if (code < 0 || code > UINT16_MAX || (code & 3) >= kNumTiers)
        return ProtocolError("locate reply has a bad location code");
      Replica c;
      c.location = Location::FromCode(static_cast<uint16_t>(code));
      const std::string p = NodePrefix(c.location.node);
      c.node_id = FieldString(h.fields, p + "id");
      c.host = FieldString(h.fields, p + "host");
      c.tcp = FieldString(h.fields, p + "tcp");
      c.ipc = FieldString(h.fields, p + "ipc");
      out[k].push_back(std::move(c));
    }
  }
  if (v != h.values.size()) return ProtocolError("locate reply has trailing values");
  return out;
}

}  // namespace pikv
