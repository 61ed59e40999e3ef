#include "pikv/client/audit.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "pikv/device/rope_math.h"
#include "pikv/proto/chunk_object.h"

namespace pikv::client {

namespace {

float Element(std::span<const uint8_t> bytes, DType dtype, size_t i) {
  if (dtype == DType::kF32) {
    float f;
    std::memcpy(&f, bytes.data() + i * 4, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, bytes.data() + i * 2, 2);
  return dtype == DType::kBF16 ? device::math::Bf16ToF32(h) : device::math::F16ToF32(h);
}

// The largest |a - b| of a block relative to its largest |b|; infinity when
// a value is finite on one side only.
double BlockError(std::span<const uint8_t> a, std::span<const uint8_t> b, DType dtype, size_t begin,
                  size_t end) {
  double worst_diff = 0, scale = 0;
  for (size_t i = begin; i < end; ++i) {
    const float x = Element(a, dtype, i), y = Element(b, dtype, i);
    if (std::isfinite(x) != std::isfinite(y)) return INFINITY;
    if (!std::isfinite(y)) continue;
    worst_diff = std::max(worst_diff, std::fabs(static_cast<double>(x) - y));
    scale = std::max(scale, std::fabs(static_cast<double>(y)));
  }
  if (worst_diff == 0) return 0;
  return scale > 0 ? worst_diff / scale : INFINITY;
}

}  // namespace

double AuditTolerance(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return 4 * 0x1p-8;  // 4 units in the last place at the block's largest value
    case DType::kF16:
      return 4 * 0x1p-11;
    case DType::kF32:
      break;
  }
  // f32's rounding is far finer than the differences between honest
  // kernels (another attention kernel, TP degree, summation order).
  return 1e-3;
}

Result<AuditFinding> CompareWithRecomputed(std::span<const uint8_t> fetched,
                                           std::span<const uint8_t> recomputed) {
  auto h = ParseChunkHeader(fetched);
  if (!h.ok()) return h.status();
  const std::span<const uint8_t> payload = ChunkPayload(fetched, *h);
  if (payload.size() != recomputed.size()) {
    return InvalidArgument("the recomputed payload has " + std::to_string(recomputed.size()) +
                           " bytes; the object has " + std::to_string(payload.size()));
  }
  const DType dtype = h->geometry.dtype;
  const size_t elements = payload.size() / DTypeSize(dtype);
  const size_t blocks = std::max<size_t>(
      1, size_t{h->geometry.num_layers} * (h->geometry.kv_format == KvFormat::kMla ? 1 : 2));
  const size_t per_block = (elements + blocks - 1) / blocks;
  AuditFinding f;
  f.tolerance = AuditTolerance(dtype);
  f.writer = h->writer.empty() ? std::string(kUnknownWriter) : h->writer;
  for (size_t begin = 0; begin < elements; begin += per_block) {
    const double e =
        BlockError(payload, recomputed, dtype, begin, std::min(elements, begin + per_block));
    f.worst = std::max(f.worst, e);
  }
  f.match = f.worst <= f.tolerance;
  return f;
}

}  // namespace pikv::client
