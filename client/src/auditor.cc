// The auditor: whether a fetched object is the chunk the engine expects
// (CheckIsChunk, before anything is remapped from it) and, on a sampled
// hit, whether its values are (Audit, by audit_rule.h); a mismatch is
// reported to the controller.
#include "channels.h"
#include "pikv/client/audit_rule.h"
#include "pikv/client/client.h"
#include "pikv/proto/chunk_object.h"

namespace pikv::client {

bool Client::ShouldAudit() {
  if (options_.audit_rate <= 0) return false;
  return std::uniform_real_distribution<double>(0, 1)(audit_rng_) < options_.audit_rate;
}

Result<Client::Audited> Client::Audit(const SharedBuffer& fetched, const ChunkPlan& chunk,
                                      std::span<const uint8_t> recomputed, RecomputedForm form) {
  if (Status s = CheckIsChunk(fetched.span(), chunk); !s.ok()) return s;
  auto finding = CompareWithRecomputed(fetched.span(), recomputed, options_.rope, form);
  if (!finding.ok()) return finding.status();
  stats_.audits++;
  Audited a{*finding, false};
  // Not comparable: not used, and nothing to report (no judgement was made).
  if (a.finding.match || !a.finding.comparable) return a;
  stats_.audit_mismatches++;
  if (rpc::AdminClient* controller = channels_->controller()) {
    // The controller drops the key everywhere; if it cannot be told, the
    // engine still knows not to use the object.
    auto dropped = controller->ReportMismatch({{chunk.key, a.finding.writer, a.finding.checksum}});
    a.reported = dropped.ok() && *dropped == 1;
  }
  return a;
}

Status Client::CheckIsChunk(std::span<const uint8_t> object, const ChunkPlan& chunk) const {
  auto h = ParseChunkHeader(object);
  if (!h.ok()) return h.status();
  const KeyNamespace ours = Namespace(chunk.context());
  const KeyNamespace theirs = NamespaceOf(*h);
  std::string differs;
  if (theirs.model_id != ours.model_id) differs = "model " + theirs.model_id;
  if (theirs.dtype != ours.dtype) differs = "dtype " + std::string(DTypeName(theirs.dtype));
  if (theirs.kv_format != ours.kv_format) differs = "KV format";
  if (theirs.rope_signature != ours.rope_signature) differs = "RoPE " + theirs.rope_signature;
  if (theirs.attention_mode != ours.attention_mode || theirs.sys_key != ours.sys_key)
    differs = "attention mode or system prompt";
  if (theirs.tenant != ours.tenant) differs = "tenant";
  if (theirs.scope != ours.scope) differs = "scope";
  if (h->geometry.num_layers != options_.num_layers ||
      h->geometry.num_kv_heads != options_.num_kv_heads ||
      h->geometry.head_dim != options_.head_dim)
    differs = "geometry";
  if (!differs.empty())
    return InvalidArgument("chunk " + chunk.key.Hex() + ": the object is for another " + differs);
  if (h->key != chunk.key || KeyOfContent(*h) != chunk.key)
    return InvalidArgument("chunk " + chunk.key.Hex() + ": the object is another chunk's");
  return Status::Ok();
}

}  // namespace pikv::client
