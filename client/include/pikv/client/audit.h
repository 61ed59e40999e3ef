// Audits: an engine's check of a fetched chunk against its own computation.
//
// A node verifies that a stored object is its key's content (namespace,
// tokens, checksums) but cannot check the KV values: an engine that stores
// wrong values under the right header (a compromised engine, or one whose
// kernels differ) poisons every reader of that key. On a sampled hit the
// engine recomputes the chunk alone (it holds the tokens) and compares.
//
// The comparison is per (layer, K|V) block: the largest element difference,
// relative to the block's largest recomputed magnitude, must stay within
// the dtype's rounding (AuditTolerance): a few units in the last place of
// the dtype, plus room for honest kernel differences in f32. Values that
// are not finite on one side only are a mismatch.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "pikv/common/status.h"
#include "pikv/proto/kv_types.h"

namespace pikv::client {

// The largest relative difference an honest recomputation may show.
double AuditTolerance(DType dtype);

struct AuditFinding {
  bool match = true;
  double worst = 0;      // the largest relative difference of any block
  double tolerance = 0;  // AuditTolerance of the object's dtype
  std::string writer;    // who the fetched object says wrote it
};

// Compares a fetched chunk object (checked by the caller as the chunk's)
// with `recomputed`: the payload [layer][k|v][token][head][dim] in the
// object's dtype, with K as the object holds it (rotated at its
// virtual_start, or pre-RoPE). InvalidArgument if the sizes differ.
Result<AuditFinding> CompareWithRecomputed(std::span<const uint8_t> fetched,
                                           std::span<const uint8_t> recomputed);

}  // namespace pikv::client
