#include "pikv/proto/locate_reply.h"

namespace pikv {

Result<std::vector<std::vector<LocatedCopy>>> DecodeLocateReply(const Header& h, size_t keys) {
  std::vector<std::vector<LocatedCopy>> out(keys);
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
      LocatedCopy c;
      c.node = static_cast<uint16_t>(code >> 2);
      c.tier = static_cast<TierKind>(code & 3);
      const std::string p = "n" + std::to_string(c.node) + ".";
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
