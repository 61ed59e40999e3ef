#include "pikv/proto/share_wire.h"

#include <algorithm>

namespace pikv {

namespace {

constexpr char kArenaBytes[] = "arena_bytes", kSealAhead[] = "seal_ahead", kLease[] = "lease",
               kTtlMs[] = "ttl_ms", kSeal[] = "seal";

}  // namespace

Header EncodeShareHello(const ShareHello& hello) {
  Header h;
  h.type = MsgType::kShareHello;
  h.fields[kArenaBytes] = hello.arena_bytes;
  if (hello.seals_ahead) h.fields[kSealAhead] = int64_t{1};
  return h;
}

ShareHello DecodeShareHello(const Header& hello) {
  return {FieldInt(hello.fields, kArenaBytes), FieldInt(hello.fields, kSealAhead) != 0};
}

void EncodeLoanTerms(const LoanTerms& terms, Header& reply) {
  if (terms.lease > 0) reply.fields[kLease] = terms.lease;
  reply.fields[kTtlMs] = terms.ttl_ms;
}

LoanTerms DecodeLoanTerms(const Header& reply) {
  return {std::max<int64_t>(0, FieldInt(reply.fields, kLease)), FieldInt(reply.fields, kTtlMs)};
}

void EncodeCommit(const CommitRequest& commit, Header& request) {
  if (commit.seal) request.fields[kSeal] = int64_t{1};
}

CommitRequest DecodeCommit(const Header& request) { return {FieldInt(request.fields, kSeal) != 0}; }

}  // namespace pikv
