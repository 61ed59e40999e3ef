// The zero-copy channel's messages (message.h: kShareHello to kWritten, over
// the host's local socket, never ZeroMQ) as declared types, where they carry
// fields; their per-key values are laid out as message.h says. The node's
// ZeroCopyServer encodes and decodes one end, rpc's ZeroCopyClient the
// other, so no field is named by hand at either.
#pragma once

#include <cstdint>

#include "pikv/proto/message.h"

namespace pikv {

// kShareHello, node -> client on connect (with the arena's fd): the arena's
// size, and whether the node understands kWritten (a put sealed ahead).
struct ShareHello {
  int64_t arena_bytes = 0;
  bool seals_ahead = false;
  friend bool operator==(const ShareHello&, const ShareHello&) = default;
};
Header EncodeShareHello(const ShareHello& hello);
ShareHello DecodeShareHello(const Header& hello);  // a missing size reads as 0

// kLease's and kReserve's replies: the loan's id (kLease; 0: nothing lent)
// and how long the node keeps it for the client, in ms from the request.
struct LoanTerms {
  int64_t lease = 0;
  int64_t ttl_ms = 0;
  friend bool operator==(const LoanTerms&, const LoanTerms&) = default;
};
void EncodeLoanTerms(const LoanTerms& terms, Header& reply);
LoanTerms DecodeLoanTerms(const Header& reply);  // a lease id below 1 reads as 0

// kCommit: whether the node computes the objects' checksums (seal) or the
// client wrote them.
struct CommitRequest {
  bool seal = false;
  friend bool operator==(const CommitRequest&, const CommitRequest&) = default;
};
void EncodeCommit(const CommitRequest& commit, Header& request);
CommitRequest DecodeCommit(const Header& request);

}  // namespace pikv
