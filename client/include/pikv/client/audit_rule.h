// Audits: an engine's check of a fetched chunk against its own computation.
//
// A node verifies that a stored object is its key's content (namespace,
// tokens, checksums) but cannot check the KV values: an engine that stores
// wrong values under the right header (a compromised engine, or one whose
// kernels differ) poisons every reader of that key. On a sampled hit the
// engine recomputes the chunk alone (it holds the tokens) and compares.
//
// Like with like. The recomputation's K is at its own positions and form
// (RecomputedForm: rotated at 0.. by default, as an engine computes a chunk
// alone), the object's at its own (rotated at virtual_start.., or pre-RoPE).
// One side is brought to the other's form (in double, by the engine's own
// RoPE plan and float cos/sin tables) before anything is compared: the fetched K re-rotated (or
// encoded) to the recomputation's positions, or a pre-RoPE recomputation encoded at the object's.
//
// The rule (AuditRule), per (layer, K|V) block, in units of the dtype's step
// (ulp; for f32 the agreement honest f32 kernels keep, far coarser):
//   - each element within element_steps steps of its own magnitude (a
//     rotated element's magnitude is its pair's: rotation mixes the pair's
//     roundings) plus floor_steps steps of the block's RMS (values near zero
//     carry their producers' absolute error) plus the angle error of RoPE
//     computed in fp32 at the positions involved (an engine's angle p * θ
//     is off by a few 2^-24 of itself: angle_ulps per side that rotated);
//   - the block's relative L2 difference within l2_steps steps.
// Values not finite on one side only, or non-finite values that differ, are
// a mismatch. A false accusation deletes honest data everywhere, so the
// rule errs towards passing; `bench/audit_catch_bench` shows what it
// catches.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "pikv/common/status.h"
#include "pikv/device/rope_plan.h"
#include "pikv/proto/kv_types.h"

namespace pikv::client {

// Where the engine's recomputed K sits: rotated at positions start.. (what
// an engine computes; the chunk alone is at 0..) or pre-RoPE.
struct RecomputedForm {
  KForm k_form = KForm::kRotated;
  int64_t start = 0;
};

struct AuditRule {
  double element_steps = 4;  // per element, in steps of its own magnitude
  double floor_steps = 2;    // per element, in steps of the block's RMS
  double l2_steps = 2;       // per block, relative L2 in steps
  double angle_ulps = 4;     // fp32 RoPE angle error per side, in 2^-24 of p * θ
};

// Bits an honest recomputation agrees to: the dtype's mantissa (bf16 7,
// f16 10); f32 14, since honest f32 kernels (another summation order, FMA
// or not) differ far above f32's own rounding.
int AuditBits(DType dtype);

// Objects at positions past this are not judged (fp32 RoPE angles there are
// off by radians: K could not be told from noise).
inline constexpr int64_t kMaxAuditPosition = int64_t{1} << 24;

struct AuditFinding {
  // False: the pair cannot be judged (the object's RoPE shape is not the
  // engine's, or its positions are past kMaxAuditPosition); match is then
  // false too (do not use it) and nothing is reported.
  bool comparable = true;
  bool match = true;
  double worst = 0;       // the largest element difference, in units of its tolerance
  double worst_l2 = 0;    // the largest block relative L2, in units of its bound
  std::string where;      // the worst block: "layer 3 K"
  std::string writer;     // who the fetched object says wrote it
  uint64_t checksum = 0;  // the fetched object's payload checksum (names the object)
};

// Compares a fetched chunk object (checked by the caller as the chunk's)
// with `recomputed`: the payload [layer][k|v][token][head][dim] in the
// object's dtype, K in `form`. InvalidArgument if the object does not parse
// or the sizes differ.
Result<AuditFinding> CompareWithRecomputed(std::span<const uint8_t> fetched,
                                           std::span<const uint8_t> recomputed,
                                           const device::RopePlan& rope, RecomputedForm form = {},
                                           const AuditRule& rule = {});

}  // namespace pikv::client
