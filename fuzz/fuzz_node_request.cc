// One request through the node's RequestHandler, as the server feeds it:
// input = [frames: 1 byte][header length: 2 bytes LE][header][payload bytes,
// cut into `frames` equal payload frames]. Storage is a real CPU tier (no
// disk, no Redis: each input must be fast), shared across inputs so that
// puts, gets, pins and deletes meet each other's state.
#include <memory>

#include "pikv/node/request_handler.h"
#include "pikv/storage/storage_manager.h"

namespace {

pikv::node::RequestHandler& Handler() {
  static auto* storage = [] {
    pikv::storage::StorageOptions o;
    o.cpu.capacity_bytes = 32 << 20;
    return pikv::storage::StorageManager::Open(o, nullptr)->release();
  }();
  static auto* handler = new pikv::node::RequestHandler(*storage, "fuzz-node");
  return *handler;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const size_t frames = data[0] % 4;
  const size_t header_len = std::min<size_t>(data[1] | data[2] << 8, size - 3);
  auto& handler = Handler();
  pikv::WireLimits limits;
  auto header = pikv::DecodeHeader({data + 3, header_len}, limits);
  if (!header.ok()) {
    handler.Reject(nullptr, header.status());
    return 0;
  }
  pikv::Message req{std::move(*header), {}};
  const uint8_t* rest = data + 3 + header_len;
  const size_t rest_len = size - 3 - header_len;
  for (size_t f = 0; f < frames; ++f) {
    const size_t begin = rest_len * f / frames, end = rest_len * (f + 1) / frames;
    req.payloads.push_back(
        pikv::SharedBuffer::FromVector(std::vector<uint8_t>(rest + begin, rest + end)));
  }
  std::vector<size_t> sizes;
  for (const auto& p : req.payloads) sizes.push_back(p.size());
  if (!pikv::CheckPayloadLimits(sizes, limits).ok()) return 0;
  if (!handler.TryHandleInline(req)) handler.Handle(req);
  return 0;
}
