#include "pikv/client/audit_rule.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "pikv/device/rope.h"
#include "pikv/device/rope_math.h"
#include "pikv/proto/chunk_object.h"

namespace pikv::client {

namespace {

using device::RopeSpec;
using device::RotationTable;

std::vector<double> ToDouble(std::span<const uint8_t> bytes, DType dtype, size_t begin,
                             size_t count) {
  std::vector<double> out(count);
  for (size_t i = 0; i < count; ++i) {
    const size_t at = begin + i;
    if (dtype == DType::kF32) {
      float f;
      std::memcpy(&f, bytes.data() + at * 4, 4);
      out[i] = f;
    } else {
      uint16_t h;
      std::memcpy(&h, bytes.data() + at * 2, 2);
      out[i] = dtype == DType::kBF16 ? device::math::Bf16ToF32(h) : device::math::F16ToF32(h);
    }
  }
  return out;
}

// The smallest step the dtype has (its least subnormal).
double MinStep(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return 0x1p-133;
    case DType::kF16:
      return 0x1p-24;
    case DType::kF32:
      break;
  }
  return 0x1p-149;
}

// One step of `bits` at magnitude m: the ulp of m with that many mantissa bits.
double Step(double m, int bits, double min_step) {
  if (!(m > 0) || !std::isfinite(m)) return min_step;
  int e = 0;
  std::frexp(m, &e);  // m = f * 2^e, f in [0.5, 1)
  return std::max(std::ldexp(1.0, e - 1 - bits), min_step);
}

// How one side's K is brought to the other's form (AlignmentFor): the
// fetched side re-rotated or encoded to the recomputation's positions, or a
// pre-RoPE recomputation encoded at the object's. Per spec of the plan, one
// table (a pure rotation) or one per token (an encoding).
struct Alignment {
  bool any = false;                   // false: both sides are in one form already
  bool rotate_fetched = true;         // else the recomputed side
  uint32_t rows = 1;                  // tables per spec
  std::vector<RotationTable> tables;  // [spec * rows + row]
  // Positions whose fp32 RoPE angles went into either side, per token:
  // position(t) = base + per_token * t (each side that rotated adds its own).
  double position_base = 0, position_per_token = 0;
};

Alignment AlignmentFor(const ChunkHeader& h, const device::RopePlan& rope, RecomputedForm form) {
  Alignment a;
  const bool object_rotated = h.k_form == KForm::kRotated;
  const bool recomputed_rotated = form.k_form == KForm::kRotated;
  if (object_rotated) {
    a.position_base += std::fabs(static_cast<double>(h.virtual_start));
    a.position_per_token += 1;
  }
  if (recomputed_rotated) {
    a.position_base += std::fabs(static_cast<double>(form.start));
    a.position_per_token += 1;
  }
  const uint32_t n = h.geometry.num_tokens;
  for (const RopeSpec& spec : rope.specs()) {
    if (recomputed_rotated && object_rotated) {
      a.any = form.start != h.virtual_start;
      a.tables.push_back(device::PureRotation(
          spec, static_cast<double>(form.start) - static_cast<double>(h.virtual_start)));
      continue;
    }
    if (!recomputed_rotated && !object_rotated) continue;
    a.any = true;
    a.rotate_fetched = recomputed_rotated;  // the pre-RoPE side is encoded
    a.rows = n;
    const int64_t at = recomputed_rotated ? form.start : h.virtual_start;
    for (uint32_t t = 0; t < n; ++t)
      a.tables.push_back(device::Encoding(spec, static_cast<double>(at) + t));
  }
  return a;
}

// Rotates every rotary pair of one layer's K block (tokens x heads x dim) in
// place by the alignment's tables for spec `index` (shaped as `spec`).
void Rotate(std::vector<double>& k, const ChunkGeometry& g, const RopeSpec& spec,
            const Alignment& a, int index) {
  const bool neox = spec.style == RopeStyle::kNeox;
  for (uint32_t t = 0; t < g.num_tokens; ++t) {
    const RotationTable& r = a.tables[index * a.rows + (a.rows == 1 ? 0 : t)];
    for (uint32_t head = 0; head < g.num_kv_heads; ++head) {
      double* v = k.data() + (size_t{t} * g.num_kv_heads + head) * g.head_dim + spec.rope_offset;
      for (uint32_t i = 0; i < spec.rotary_dim / 2; ++i) {
        uint32_t first = 0, second = 0;
        device::math::PairIndex(neox, spec.rotary_dim, i, first, second);
        const double x = v[first], y = v[second], c = r.cos[i], s = r.sin[i];
        v[first] = x * c - y * s;
        v[second] = y * c + x * s;
      }
    }
  }
}

// Per element of a K block: the magnitude that sets its tolerance (its
// rotary pair's, else its own) and its RoPE angle error per unit magnitude.
void RotaryMagnitudes(const std::vector<double>& k, const ChunkGeometry& g, const RopeSpec& spec,
                      const Alignment& a, double angle_ulps, std::vector<double>& magnitude,
                      std::vector<double>& angle_error) {
  const bool neox = spec.style == RopeStyle::kNeox;
  const std::vector<double> inv_freq = spec.InverseFrequencies();
  for (uint32_t t = 0; t < g.num_tokens; ++t) {
    const double position = a.position_base + a.position_per_token * t;
    for (uint32_t head = 0; head < g.num_kv_heads; ++head) {
      const size_t row = (size_t{t} * g.num_kv_heads + head) * g.head_dim + spec.rope_offset;
      for (uint32_t i = 0; i < spec.rotary_dim / 2; ++i) {
        uint32_t first = 0, second = 0;
        device::math::PairIndex(neox, spec.rotary_dim, i, first, second);
        const double m = std::hypot(k[row + first], k[row + second]);
        // A pair with a value not finite: each element by its own magnitude
        // (Judge flags the one not finite).
        if (!std::isfinite(m)) continue;
        magnitude[row + first] = magnitude[row + second] = m;
        angle_error[row + first] = angle_error[row + second] =
            angle_ulps * 0x1p-24 * position * inv_freq[i];
      }
    }
  }
}

struct BlockVerdict {
  double worst = 0, l2 = 0;  // in units of their tolerances
};

// Judges one block: `fetched` against the engine's `recomputed` values.
BlockVerdict Judge(const std::vector<double>& fetched, const std::vector<double>& recomputed,
                   const std::vector<double>& magnitude, const std::vector<double>& angle_error,
                   DType dtype, const AuditRule& rule) {
  const int bits = AuditBits(dtype);
  const double min_step = MinStep(dtype);
  double sum_sq = 0;
  size_t finite = 0;
  for (double y : recomputed) {
    if (std::isfinite(y)) sum_sq += y * y, ++finite;
  }
  const double rms = finite ? std::sqrt(sum_sq / static_cast<double>(finite)) : 0;
  const double floor = rule.floor_steps * Step(rms, bits, min_step);
  BlockVerdict v;
  double diff_sq = 0, angle_sq = 0;
  for (size_t i = 0; i < fetched.size(); ++i) {
    const double x = fetched[i], y = recomputed[i];
    if (!std::isfinite(x) || !std::isfinite(y)) {
      const bool same = std::isnan(x) ? std::isnan(y) : x == y;
      if (!same) v.worst = INFINITY;
      continue;
    }
    const double d = std::fabs(x - y);
    const double angle = angle_error[i] * magnitude[i];
    const double tolerance =
        rule.element_steps * Step(magnitude[i], bits, min_step) + floor + angle;
    v.worst = std::max(v.worst, d / tolerance);
    diff_sq += d * d;
    angle_sq += angle * angle;
  }
  const double bound = rule.l2_steps * std::ldexp(std::sqrt(sum_sq), -bits) + std::sqrt(angle_sq) +
                       min_step * std::sqrt(static_cast<double>(fetched.size()));
  v.l2 = std::sqrt(diff_sq) / bound;
  return v;
}

}  // namespace

int AuditBits(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return 7;
    case DType::kF16:
      return 10;
    case DType::kF32:
      break;
  }
  return 14;
}

Result<AuditFinding> CompareWithRecomputed(std::span<const uint8_t> fetched,
                                           std::span<const uint8_t> recomputed,
                                           const device::RopePlan& rope, RecomputedForm form,
                                           const AuditRule& rule) {
  auto parsed = ParseChunkHeader(fetched);
  if (!parsed.ok()) return parsed.status();
  const ChunkHeader& h = *parsed;
  const std::span<const uint8_t> payload = ChunkPayload(fetched, h);
  if (payload.size() != recomputed.size()) {
    return InvalidArgument("the recomputed payload has " + std::to_string(recomputed.size()) +
                           " bytes; the object has " + std::to_string(payload.size()));
  }
  AuditFinding f;
  f.writer = h.writer.empty() ? std::string(kUnknownWriter) : h.writer;
  f.checksum = h.payload_checksum;
  // Judged only by the engine's own RoPE (the header's shape is the
  // writer's word), at positions where fp32 RoPE still means something.
  const RopeSpec& shape = rope.main();
  if (h.rope_spec != rope.Signature() || !rope.Validate(h.geometry.num_layers).ok() ||
      h.rope_style != shape.style || h.rotary_dim != shape.rotary_dim ||
      h.rope_offset != shape.rope_offset || h.geometry.head_dim != shape.head_dim) {
    f.comparable = false;
    f.where = "the object's RoPE is not the engine's";
  } else if (h.virtual_start < -kMaxAuditPosition || h.virtual_start > kMaxAuditPosition ||
             form.start < -kMaxAuditPosition || form.start > kMaxAuditPosition) {
    f.comparable = false;
    f.where = "positions past " + std::to_string(kMaxAuditPosition);
  }
  if (!f.comparable) {
    f.match = false;
    return f;
  }
  const ChunkGeometry& g = h.geometry;
  const uint32_t planes = g.kv_format == KvFormat::kMla ? 1 : 2;
  const size_t block = size_t{g.num_tokens} * g.num_kv_heads * g.head_dim;
  const Alignment align = AlignmentFor(h, rope, form);
  double worst_score = 0;
  for (uint32_t layer = 0; layer < g.num_layers; ++layer) {
    for (uint32_t plane = 0; plane < planes; ++plane) {
      const size_t begin = (size_t{layer} * planes + plane) * block;
      std::vector<double> a = ToDouble(payload, g.dtype, begin, block);
      std::vector<double> b = ToDouble(recomputed, g.dtype, begin, block);
      std::vector<double> magnitude(block), angle_error(block, 0.0);
      const int spec = rope.SpecIndex(layer);
      const bool rotary = plane == 0 && spec != device::RopePlan::kNoRope;
      if (rotary && align.any)
        Rotate(align.rotate_fetched ? a : b, g, rope.specs()[spec], align, spec);
      for (size_t i = 0; i < block; ++i) magnitude[i] = std::isfinite(b[i]) ? std::fabs(b[i]) : 0;
      if (rotary)
        RotaryMagnitudes(b, g, rope.specs()[spec], align, rule.angle_ulps, magnitude, angle_error);
      const BlockVerdict v = Judge(a, b, magnitude, angle_error, g.dtype, rule);
      if (std::max(v.worst, v.l2) > worst_score || f.where.empty()) {
        worst_score = std::max(v.worst, v.l2);
        f.where = "layer " + std::to_string(layer) + (plane == 0 ? " K" : " V");
      }
      f.worst = std::max(f.worst, v.worst);
      f.worst_l2 = std::max(f.worst_l2, v.l2);
    }
  }
  f.match = f.worst <= 1 && f.worst_l2 <= 1;
  return f;
}

}  // namespace pikv::client
