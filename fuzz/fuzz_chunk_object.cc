// Chunk object parsing and verification: what every tier and client does
// with bytes read from a disk, Redis or a peer.
#include "pikv/proto/chunk_object.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> object(data, size);
  auto header = pikv::ParseChunkHeader(object);
  if (header.ok()) {
    auto payload = pikv::ChunkPayload(object, *header);
    (void)pikv::PayloadChecksum(payload);
    pikv::VerifyChunkObject(object, &header->key).IgnoreError();
  }
  pikv::VerifyChunkObject(object).IgnoreError();
  return 0;
}
