// Remap and gather: moving a chunk's KV between the chunk object format and
// an engine's paged cache.
//
// Remap writes a chunk placed at actual positions a0 .. a0+n-1 into the
// cache: K rotated and V copied in one pass over each (layer, token, head).
// Each layer by its own spec of the RopePlan; a NoPE layer's K is copied.
//   - K rotated at virtual v0 (the default form): every token is re-rotated by
//     the same pure rotation R(a0 - v0).
//   - K pre-RoPE: token t gets the engine's own encoding R(a0 + t), magnitude
//     factor included, so it matches keys the engine computes itself.
// Everything is checked before the first write: the object's header, its RoPE
// signature against `rope`, dtype, format and geometry against the layout,
// slot range, repeated slots. The payload is not re-hashed (verify it once
// after it crossed a network or a disk). CPU backend: AVX2 + FMA + F16C when
// the processor has them (checked at run time), portable code otherwise, on
// `threads` threads.
//
// Gather is the inverse (the store path): it reads a chunk's K and V out of
// the cache by slots into a new chunk object, hashing the payload in the same
// pass. Gather then remap at the same position writes back the same bits.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "pikv/device/paged_layout.h"
#include "pikv/device/rope_plan.h"
#include "pikv/proto/chunk_object.h"

namespace pikv::device {

enum class Backend { kAuto, kPortable, kAvx2 };
bool Avx2Available();

struct RemapOptions {
  int threads = 1;
  Backend backend = Backend::kAuto;
};

Status Remap(std::span<const uint8_t> object, const RopePlan& rope, int64_t actual_start,
             std::span<const int64_t> slots, const PagedLayout& cache,
             const RemapOptions& options = {});

// What a remap on another device needs (pikv.device: the engine's own torch
// does the math there): everything Remap checks, checked the same way
// before any byte moves (the cache's geometry only: its memory is never
// touched), and the rotations Remap would apply, computed in double and
// stored as float. Remap itself runs on these.
struct RemapTables {
  ChunkHeader header;           // geometry, K form; header_size is the payload's offset
  std::vector<int> layer_spec;  // per layer: its rotation set, or RopePlan::kNoRope
  uint32_t rows = 1;            // rotations per set: 1 (rotated K) or one per token (pre-RoPE)
  std::vector<float> cos, sin;  // [set][row][rotary_dim / 2]
};
Result<RemapTables> PrepareRemap(std::span<const uint8_t> object, const RopePlan& rope,
                                 int64_t actual_start, std::span<const int64_t> slots,
                                 const PagedLayout& cache);

// What a gathered chunk object says about itself besides the KV.
struct GatherSpec {
  ChunkKey key;
  std::string model_id;
  std::vector<int32_t> tokens;  // one per slot
  KForm k_form = KForm::kRotated;
  int64_t virtual_start = 0;  // the positions the cached K was rotated at
  // The rest of the key's namespace (model id above; dtype, format and RoPE
  // come from the cache and RopeSpec): the key must hash them with the tokens.
  AttentionMode attention_mode = AttentionMode::kIsolated;
  std::optional<ChunkKey> sys_key;
  std::string tenant;             // the writer's tenant ("" = the default one)
  std::optional<ChunkKey> scope;  // the namespace's scope (KeyNamespace::scope)
  bool checksum = true;           // false: left for the receiver to seal (SealChunkObject)
  // Threads for an unsealed gather (the rows are independent then; a
  // checksummed one hashes them in order, on one thread).
  int threads = 1;
  // An unsealed gather writes the header first, then the rows in order,
  // and tells `written` after each kWrittenStep of them.
  WrittenFn written;
};

// An unsealed gather of at least this many payload bytes streams its runs
// of rows past the caches (StreamCopy): the object is far larger than them
// and the node, not this thread, reads it next.
inline constexpr uint64_t kStreamGatherBytes = uint64_t{16} << 20;

Result<std::vector<uint8_t>> Gather(const PagedLayout& cache, std::span<const int64_t> slots,
                                    const RopePlan& rope, const GatherSpec& spec);
// The same into a caller's buffer of exactly GatherSize bytes (a reused
// staging buffer: no allocation or page faults per chunk).
Result<size_t> GatherSize(const PagedLayout& cache, std::span<const int64_t> slots,
                          const RopePlan& rope, const GatherSpec& spec);
Status GatherInto(const PagedLayout& cache, std::span<const int64_t> slots, const RopePlan& rope,
                  const GatherSpec& spec, std::span<uint8_t> object);

}  // namespace pikv::device
