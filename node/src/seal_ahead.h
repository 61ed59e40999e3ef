// SealAhead: the payload checksum of a zero-copy reservation, hashed while
// its client is still writing it.
//
// A client that fills reserved arena space marks its leading bytes written
// as it goes (kWritten: the header first, then the payload in order). The
// node hashes each newly marked piece on its own core, right behind the
// writer, so a sealing commit hashes only what came after the last mark
// instead of the whole object (17 ms per 512 MiB here) after the writer is
// done. The marks are the client's word: it could change marked bytes, as
// it could change a committed object, since same-user clients are trusted
// writers (zero_copy_server.h). A mark that goes backwards or past the space
// is refused; a header whose size moved since the first mark makes Finish
// give up, and the commit hashes the whole payload as before.
// Thread-safety: none; one connection's serving thread uses it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "pikv/proto/chunk_object.h"

namespace pikv::node {

class SealAhead {
 public:
  // Hashes bytes [marked, written) of `space`; false (and nothing hashed)
  // for a mark behind the last one or past the end.
  bool Mark(std::span<const uint8_t> space, uint64_t written);
  // The payload checksum of the finished object in `space`, hashing what
  // was not marked; nullopt when nothing was, or the header moved since.
  std::optional<uint64_t> Finish(std::span<const uint8_t> space);
  uint64_t marked() const { return sum_.appended(); }

 private:
  StreamingPayloadChecksum sum_;
};

}  // namespace pikv::node
