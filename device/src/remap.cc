#include "pikv/device/remap.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "kernels.h"
#include "pikv/common/stream_copy.h"
#include "pikv/proto/checksum.h"

namespace pikv::device {

// ---- PagedLayout ---------------------------------------------------------------------

PagedLayout PagedLayout::Make(Order order, DType dtype, KvFormat format, uint32_t heads,
                              uint32_t dim, uint32_t block_size, uint64_t num_blocks) {
  PagedLayout l{.dtype = dtype,
                .kv_format = format,
                .num_kv_heads = heads,
                .head_dim = dim,
                .block_size = block_size,
                .num_blocks = num_blocks,
                .layers = {}};  // the caller's
  // The orders differ on two axes. Within a block: a token's heads together
  // (NHD) or a head's tokens together (HND).
  const bool hnd = order == Order::kFlashHnd;
  l.stride_head = hnd ? int64_t{block_size} * dim : dim;
  l.stride_offset = hnd ? dim : int64_t{heads} * dim;
  // Above it: K and V as two planes of all blocks, or each block holding both.
  const int64_t block = int64_t{block_size} * heads * dim;
  if (order == Order::kBlockMajor) {
    l.stride_plane = block;
    l.stride_block = block * l.planes();
  } else {
    l.stride_block = block;
    l.stride_plane = block * static_cast<int64_t>(num_blocks);
  }
  return l;
}

uint64_t PagedLayout::ElementsPerLayer() const {
  // The farthest element any (plane, block, offset, head, d) reaches, plus one.
  return (planes() - 1) * stride_plane + (num_blocks - 1) * stride_block +
         (block_size - 1) * stride_offset + (num_kv_heads - 1) * stride_head + head_dim;
}

uint8_t* PagedLayout::HeadVector(uint32_t layer, uint32_t plane, int64_t slot,
                                 uint32_t head) const {
  const int64_t block = slot / block_size, offset = slot % block_size;
  const int64_t element =
      plane * stride_plane + block * stride_block + offset * stride_offset + head * stride_head;
  return static_cast<uint8_t*>(layers[layer]) + element * static_cast<int64_t>(DTypeSize(dtype));
}

Status PagedLayout::Validate() const {
  if (num_kv_heads == 0 || head_dim == 0 || block_size == 0 || num_blocks == 0) {
    return InvalidArgument("paged layout has an empty dimension");
  }
  if (stride_head <= 0 || stride_offset <= 0 || stride_block <= 0 ||
      (planes() > 1 && stride_plane <= 0)) {
    return InvalidArgument("paged layout strides must be positive");
  }
  // Head vectors of distinct (plane, block, offset, head) must not overlap:
  // sort the strides and require each to clear everything below it.
  struct Axis {
    int64_t stride;
    uint64_t count;
  };
  std::vector<Axis> axes = {
      {stride_head, num_kv_heads}, {stride_offset, block_size}, {stride_block, num_blocks}};
  if (planes() > 1) axes.push_back({stride_plane, planes()});
  std::sort(axes.begin(), axes.end(),
            [](const Axis& a, const Axis& b) { return a.stride < b.stride; });
  int64_t extent = head_dim;
  for (const Axis& a : axes) {
    if (a.count > 1 && a.stride < extent)
      return InvalidArgument("paged layout strides overlap head vectors");
    extent = a.stride * static_cast<int64_t>(a.count);
  }
  for (void* p : layers) {
    if (!p) return InvalidArgument("paged layout has a null layer pointer");
  }
  return Status::Ok();
}

// ---- Remap ---------------------------------------------------------------------------

bool Avx2Available() {
  static const bool available = kernels::CpuHasAvx2();
  return available;
}

namespace {

// Checks everything a remap or gather depends on, before any byte moves.
Status CheckPlacement(const ChunkGeometry& g, const RopePlan& rope, std::span<const int64_t> slots,
                      const PagedLayout& cache) {
  if (Status s = cache.Validate(); !s.ok()) return s;
  if (Status s = rope.Validate(g.num_layers); !s.ok()) return s;
  if (g.dtype != cache.dtype) {
    return InvalidArgument(std::string("chunk dtype ") + std::string(DTypeName(g.dtype)) +
                           " differs from cache dtype " + std::string(DTypeName(cache.dtype)));
  }
  if (g.kv_format != cache.kv_format)
    return InvalidArgument("chunk KV format differs from the cache's");
  if (g.num_layers != cache.layers.size())
    return InvalidArgument("chunk and cache have different layer counts");
  if (g.num_kv_heads != cache.num_kv_heads || g.head_dim != cache.head_dim) {
    return InvalidArgument("chunk and cache have different KV heads or head_dim");
  }
  if (rope.main().head_dim != g.head_dim)
    return InvalidArgument("RoPE spec head_dim differs from the chunk's");
  if (slots.size() != g.num_tokens) {
    return InvalidArgument("slot mapping has " + std::to_string(slots.size()) + " entries for " +
                           std::to_string(g.num_tokens) + " tokens");
  }
  std::vector<int64_t> used;
  used.reserve(slots.size());
  for (int64_t s : slots) {
    if (s == -1) continue;
    if (s < 0 || static_cast<uint64_t>(s) >= cache.num_slots()) {
      return InvalidArgument("slot " + std::to_string(s) + " is outside the cache's " +
                             std::to_string(cache.num_slots()) + " slots");
    }
    used.push_back(s);
  }
  std::sort(used.begin(), used.end());
  if (std::adjacent_find(used.begin(), used.end()) != used.end()) {
    return InvalidArgument("slot mapping writes one slot twice");
  }
  return Status::Ok();
}

// Runs fn(begin, end) over [0, n) split across `threads`.
template <typename Fn>
void Parallel(uint64_t n, int threads, Fn fn) {
  threads = std::max(1, std::min<int>(threads, static_cast<int>(std::max<uint64_t>(1, n / 64))));
  if (threads == 1) {
    fn(0, n);
    return;
  }
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] { fn(n * t / threads, n * (t + 1) / threads); });
  }
  for (auto& th : pool) th.join();
}

}  // namespace

Result<RemapTables> PrepareRemap(std::span<const uint8_t> object, const RopePlan& rope,
                                 int64_t actual_start, std::span<const int64_t> slots,
                                 const PagedLayout& cache) {
  auto header = ParseChunkHeader(object);
  if (!header.ok()) return header.status();
  const ChunkHeader& h = *header;
  if (h.rope_spec != rope.Signature()) {
    return InvalidArgument("chunk was encoded with RoPE '" + h.rope_spec + "', the engine uses '" +
                           rope.Signature() + "'");
  }
  if (Status s = CheckPlacement(h.geometry, rope, slots, cache); !s.ok()) return s;
  RemapTables t;
  t.header = h;
  const uint32_t n = h.geometry.num_tokens;
  for (uint32_t l = 0; l < h.geometry.num_layers; ++l) t.layer_spec.push_back(rope.SpecIndex(l));
  // Per spec of the plan: one rotation for a rotated chunk, one per token for
  // a pre-RoPE chunk. NoPE layers have none (K is copied like V).
  t.rows = h.k_form == KForm::kRotated ? 1 : n;
  for (const RopeSpec& spec : rope.specs()) {
    for (uint32_t row = 0; row < t.rows; ++row) {
      const RotationTable r =
          h.k_form == KForm::kRotated
              ? PureRotation(spec, static_cast<double>(actual_start - h.virtual_start))
              : Encoding(spec, static_cast<double>(actual_start + row));
      t.cos.insert(t.cos.end(), r.cos.begin(), r.cos.end());
      t.sin.insert(t.sin.end(), r.sin.begin(), r.sin.end());
    }
  }
  return t;
}

Status Remap(std::span<const uint8_t> object, const RopePlan& rope, int64_t actual_start,
             std::span<const int64_t> slots, const PagedLayout& cache,
             const RemapOptions& options) {
  if (!cache.host) return InvalidArgument("the cache is in a device's memory: remap it there");
  auto tables = PrepareRemap(object, rope, actual_start, slots, cache);
  if (!tables.ok()) return tables.status();
  const ChunkHeader& h = tables->header;
  if (options.backend == Backend::kAvx2 && !Avx2Available())
    return Unsupported("this CPU has no AVX2/FMA/F16C");
  const bool avx2 = options.backend != Backend::kPortable && Avx2Available();

  const ChunkGeometry& g = h.geometry;
  const uint32_t n = g.num_tokens;
  const size_t half = rope.main().rotary_dim / 2;
  std::vector<std::vector<kernels::Rotation>> rotations(rope.specs().size());
  for (size_t s = 0; s < rotations.size(); ++s) {
    rotations[s].resize(tables->rows);
    for (uint32_t row = 0; row < tables->rows; ++row) {
      const size_t at = (s * tables->rows + row) * half;
      rotations[s][row].Fill({tables->cos.begin() + at, tables->cos.begin() + at + half},
                             {tables->sin.begin() + at, tables->sin.begin() + at + half});
    }
  }
  const RopeSpec& main = rope.main();
  const kernels::HeadShape shape{g.head_dim, main.rotary_dim, main.rope_offset,
                                 main.style == RopeStyle::kNeox};
  const size_t vec_bytes = size_t{g.head_dim} * DTypeSize(g.dtype);
  const size_t token_bytes = vec_bytes * g.num_kv_heads;
  const uint32_t planes = cache.planes();
  const uint8_t* payload = ChunkPayload(object, h).data();

  // Work items are (layer, token); each writes K (rotated) then V (copied).
  Parallel(uint64_t{g.num_layers} * n, options.threads, [&](uint64_t begin, uint64_t end) {
    for (uint64_t item = begin; item < end; ++item) {
      const uint32_t layer = static_cast<uint32_t>(item / n), t = static_cast<uint32_t>(item % n);
      const int64_t slot = slots[t];
      if (slot < 0) continue;
      const int spec = rope.SpecIndex(layer);
      const uint8_t* k_src = payload + ((uint64_t{layer} * planes) * n + t) * token_bytes;
      for (uint32_t head = 0; head < g.num_kv_heads; ++head) {
        const uint8_t* src = k_src + head * vec_bytes;
        uint8_t* dst = cache.HeadVector(layer, 0, slot, head);
        if (spec == RopePlan::kNoRope) {
          std::memcpy(dst, src, vec_bytes);
          continue;
        }
        const kernels::Rotation& rot = rotations[spec][h.k_form == KForm::kRotated ? 0 : t];
        if (!avx2 || !kernels::RotateHeadAvx2(g.dtype, src, dst, shape, rot)) {
          kernels::RotateHeadPortable(g.dtype, src, dst, shape, rot);
        }
      }
      if (planes == 2) {
        const uint8_t* v_src = payload + ((uint64_t{layer} * planes + 1) * n + t) * token_bytes;
        for (uint32_t head = 0; head < g.num_kv_heads; ++head) {
          std::memcpy(cache.HeadVector(layer, 1, slot, head), v_src + head * vec_bytes, vec_bytes);
        }
      }
    }
  });
  return Status::Ok();
}

// ---- Gather --------------------------------------------------------------------------

namespace {

// The header a gather writes, after checking the placement.
Result<ChunkHeader> GatherHeader(const PagedLayout& cache, std::span<const int64_t> slots,
                                 const RopePlan& rope, const GatherSpec& spec) {
  ChunkHeader h;
  h.key = spec.key;
  h.model_id = spec.model_id;
  h.geometry = {static_cast<uint32_t>(cache.layers.size()),
                static_cast<uint32_t>(slots.size()),
                cache.num_kv_heads,
                cache.head_dim,
                cache.dtype,
                cache.kv_format};
  SetHeaderRope(rope, h);
  h.k_form = spec.k_form;
  h.virtual_start = spec.virtual_start;
  h.attention_mode = spec.attention_mode;
  h.sys_key = spec.sys_key;
  h.tenant = spec.tenant;
  h.scope = spec.scope;
  h.tokens = spec.tokens;
  if (spec.tokens.size() != slots.size())
    return InvalidArgument("gather needs one token id per slot");
  if (std::find(slots.begin(), slots.end(), -1) != slots.end())
    return InvalidArgument("gather cannot skip slots");
  if (Status s = CheckPlacement(h.geometry, rope, slots, cache); !s.ok()) return s;
  return h;
}

}  // namespace

Result<size_t> GatherSize(const PagedLayout& cache, std::span<const int64_t> slots,
                          const RopePlan& rope, const GatherSpec& spec) {
  auto h = GatherHeader(cache, slots, rope, spec);
  if (!h.ok()) return h.status();
  return ChunkHeaderSize(*h) + h->geometry.PayloadBytes();
}

Status GatherInto(const PagedLayout& cache, std::span<const int64_t> slots, const RopePlan& rope,
                  const GatherSpec& spec, std::span<uint8_t> object) {
  if (!cache.host) return InvalidArgument("the cache is in a device's memory: gather it there");
  auto h = GatherHeader(cache, slots, rope, spec);
  if (!h.ok()) return h.status();
  const size_t header_size = ChunkHeaderSize(*h);
  if (object.size() != header_size + h->geometry.PayloadBytes())
    return InvalidArgument("gather buffer has the wrong size");
  const size_t vec_bytes = size_t{cache.head_dim} * DTypeSize(cache.dtype);
  // Payload order [layer][plane][token][head][dim]: row r = (layer, plane,
  // token) is a token's heads, contiguous at r * row_bytes.
  uint8_t* const out = object.data() + header_size;
  const size_t row_bytes = vec_bytes * cache.num_kv_heads;
  const uint64_t per_layer = uint64_t{cache.planes()} * slots.size();
  const uint64_t rows = per_layer * h->geometry.num_layers;
  auto source = [&](uint64_t r, uint32_t head) {
    return cache.HeadVector(static_cast<uint32_t>(r / per_layer),
                            static_cast<uint32_t>(r % per_layer / slots.size()),
                            slots[r % slots.size()], head);
  };
  const bool heads_adjacent =
      cache.num_kv_heads == 1 ||
      static_cast<uint64_t>(cache.stride_head) * DTypeSize(cache.dtype) == vec_bytes;
  // A large object the node hashes (not this thread) is stored around the
  // caches where its rows come in runs: plain stores would first read each
  // line of it in, and the runs are too small for memcpy to stream them
  // itself (measured here: 32 KiB runs of 512 MiB 1.6-1.8x one memcpy,
  // streamed 1.1x).
  const bool stream = !spec.checksum && h->geometry.PayloadBytes() >= kStreamGatherBytes;
  auto copy = [stream](uint8_t* to, const uint8_t* from, size_t n) {
    stream ? StreamCopy(to, from, n) : void(std::memcpy(to, from, n));
  };
  // Rows [begin, end). Where a token's heads lie side by side (vLLM's
  // layout), rows whose sources follow each other in memory (consecutive
  // slots) are one copy, not one per head vector (256 bytes at head_dim
  // 128 in bf16: 2 M calls per 512 MiB).
  auto copy_rows = [&](uint64_t begin, uint64_t end) {
    for (uint64_t r = begin; r < end;) {
      uint8_t* row = out + r * row_bytes;
      if (!heads_adjacent) {  // head vectors are too short to stream (each would fence)
        for (uint32_t head = 0; head < cache.num_kv_heads; ++head)
          std::memcpy(row + head * vec_bytes, source(r, head), vec_bytes);
        ++r;
        continue;
      }
      const uint8_t* from = source(r, 0);
      uint64_t n = 1;
      while (r + n < end && source(r + n, 0) == from + n * row_bytes) ++n;
      copy(row, from, n * row_bytes);
      r += n;
    }
  };
  if (!spec.checksum) {  // rows are independent: any split of a step works
    if (Status s = WriteChunkHeader(*h, 0, object); !s.ok()) return s;
    const uint64_t step = std::max<uint64_t>(1, kWrittenStep / row_bytes);
    for (uint64_t from = 0; from < rows; from += step) {
      const uint64_t to = std::min(rows, from + step);
      Parallel(to - from, spec.threads,
               [&](uint64_t begin, uint64_t end) { copy_rows(from + begin, from + end); });
      if (spec.written) spec.written(header_size + to * row_bytes);
    }
    return Status::Ok();
  }
  // In order, each cache-sized block of rows hashed right after it is copied.
  const uint64_t block_rows = std::max<uint64_t>(1, (256u << 10) / row_bytes);
  Xxh3Stream checksum;
  for (uint64_t from = 0; from < rows; from += block_rows) {
    const uint64_t to = std::min(rows, from + block_rows);
    copy_rows(from, to);
    checksum.Update({out + from * row_bytes, (to - from) * row_bytes});
  }
  return WriteChunkHeader(*h, checksum.Digest(), object);
}

Result<std::vector<uint8_t>> Gather(const PagedLayout& cache, std::span<const int64_t> slots,
                                    const RopePlan& rope, const GatherSpec& spec) {
  auto size = GatherSize(cache, slots, rope, spec);
  if (!size.ok()) return size.status();
  std::vector<uint8_t> object(*size);
  if (Status s = GatherInto(cache, slots, rope, spec, object); !s.ok()) return s;
  return object;
}

}  // namespace pikv::device
