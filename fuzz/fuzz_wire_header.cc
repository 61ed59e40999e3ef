// The wire header decoder, then every declared message's decoder
// (locate_reply.h, control_wire.h, data_wire.h, share_wire.h, message.h's
// streams) over what it gives; a header that
// decodes must re-encode to something that decodes the same, and so must
// each declared message.
#include <cstdlib>

#include "pikv/proto/control_wire.h"
#include "pikv/proto/data_wire.h"
#include "pikv/proto/locate_reply.h"
#include "pikv/proto/message.h"
#include "pikv/proto/share_wire.h"

namespace {

// `h` read as a declared message, written into a fresh header and read
// again: the same message, or the fuzzer stops.
template <typename Decode, typename Encode>
void RoundTrips(const pikv::Header& h, Decode decode, Encode encode) {
  const auto first = decode(h);
  pikv::Header again;
  encode(first, again);
  if (!(decode(again) == first)) abort();
}

void EachFieldMessageRoundTrips(const pikv::Header& h) {
  using namespace pikv;
  RoundTrips(h, DecodePull, EncodePull);
  RoundTrips(h, DecodeStreamedPut, EncodeStreamedPut);
  RoundTrips(h, StreamFrameOf, SetStreamFrame);
  RoundTrips(h, AnsweringNode, SetAnsweringNode);
  RoundTrips(h, DecodeNodeIdentity, EncodeNodeIdentity);
  RoundTrips(h, DecodeHeartbeatReply, EncodeHeartbeatReply);
  RoundTrips(h, DecodeLocate, EncodeLocate);
  RoundTrips(h, DecodeAdminTarget, EncodeAdminTarget);
  RoundTrips(h, DecodeNotLeader, EncodeNotLeader);
  RoundTrips(h, EpochOf, StampEpoch);
  RoundTrips(h, RegistryFilling, [](bool filling, Header& out) {
    if (filling) MarkRegistryFilling(out);
  });
  RoundTrips(h, DecodeShareHello,
             [](const ShareHello& hello, Header& out) { out = EncodeShareHello(hello); });
  RoundTrips(h, DecodeLoanTerms, EncodeLoanTerms);
  RoundTrips(h, DecodeCommit, EncodeCommit);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto h = pikv::DecodeHeader({data, size});
  if (!h.ok()) return 0;
  pikv::DecodeLocateReply(*h, h->keys.size()).status().IgnoreError();
  const pikv::NodeRegistration reg = pikv::DecodeRegister(*h);
  if (pikv::DecodeRegister(pikv::EncodeRegister(reg)) != reg) abort();
  pikv::DecodeRegisterReply(*h);
  pikv::NodeReport report = pikv::DecodeReport(*h);
  const pikv::NodeReport again_report = pikv::DecodeReport(pikv::EncodeReport(h->type, report));
  if (again_report.keys != report.keys || again_report.values != report.values ||
      again_report.owners.size() != report.owners.size())
    abort();
  const auto mismatches = pikv::DecodeMismatches(*h);
  if (pikv::DecodeMismatches(pikv::EncodeMismatches(mismatches)) != mismatches) abort();
  pikv::DecodeMismatchReply(*h).status().IgnoreError();
  EachFieldMessageRoundTrips(*h);
  const pikv::NodeUsage usage = pikv::DecodeHeartbeat(*h);
  if (pikv::DecodeHeartbeat(pikv::EncodeHeartbeat(usage)) != usage) abort();
  const pikv::Revocation revocation = pikv::DecodeRevoke(*h);
  if (pikv::DecodeRevoke(pikv::EncodeRevoke(h->type, revocation)) != revocation) abort();
  const std::string again = pikv::EncodeHeader(*h);
  auto h2 = pikv::DecodeHeader({reinterpret_cast<const uint8_t*>(again.data()), again.size()});
  if (!h2.ok() || h2->keys != h->keys || h2->values != h->values || h2->fields != h->fields ||
      h2->reason != h->reason || h2->type != h->type || h2->request_id != h->request_id)
    abort();
  return 0;
}
