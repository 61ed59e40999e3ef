#include <cuda_runtime.h>

#include "pikv/device/remap_cuda.h"
#include "pikv/device/rope_math.h"

namespace pikv::device {

namespace {

constexpr int kMaxLayers = 256;
constexpr unsigned kDefaultThreads = 128;

struct Params {
  const uint8_t* payload;
  const int64_t* slots;
  const float* cos;
  const float* sin;
  uint8_t* layers[kMaxLayers];
  int16_t layer_spec[kMaxLayers];  // index into the plan's specs, or -1 (NoPE)
  uint32_t tokens, heads, dim, rotary, offset, planes, block_size, dtype_size;
  int dtype;  // DType
  bool neox, per_token;
  bool words;         // every head vector's source and destination 16-byte aligned
  bool rotary_words;  // and the rotary part in whole words (of each half, NeoX)
  int64_t stride_plane, stride_block, stride_offset, stride_head;  // in elements
};

// Elements are read and written at their own width: a head vector's
// elements are aligned to it (strides count elements).
__device__ __forceinline__ float Load(int dtype, const uint8_t* p) {
  switch (dtype) {
    case 1:
      return *reinterpret_cast<const float*>(p);
    case 2:
      return math::F16ToF32(*reinterpret_cast<const uint16_t*>(p));
    default:
      return math::Bf16ToF32(*reinterpret_cast<const uint16_t*>(p));
  }
}

__device__ __forceinline__ void Store(int dtype, uint8_t* p, float f) {
  switch (dtype) {
    case 1:
      *reinterpret_cast<float*>(p) = f;
      return;
    case 2:
      *reinterpret_cast<uint16_t*>(p) = math::F32ToF16(f);
      return;
    default:
      *reinterpret_cast<uint16_t*>(p) = math::F32ToBf16(f);
      return;
  }
}

__device__ __forceinline__ void CopyElement(uint32_t size, const uint8_t* src, uint8_t* dst) {
  if (size == 4)
    *reinterpret_cast<uint32_t*>(dst) = *reinterpret_cast<const uint32_t*>(src);
  else
    *reinterpret_cast<uint16_t*>(dst) = *reinterpret_cast<const uint16_t*>(src);
}

// The threads of a block that work on one plane: K and V are written by
// separate groups at once, so both planes' loads are in flight together.
struct Team {
  uint32_t rank, size;
};

// Dims [from, to) of every head, copied: in 16-byte words when the whole
// vector is copied and aligned (two per thread at a time, both loaded
// before either is stored), else element by element.
__device__ void CopyDims(const Params& p, Team team, const uint8_t* src, uint8_t* dst,
                         uint32_t from, uint32_t to) {
  const uint32_t es = p.dtype_size, vec = p.dim * es, span = to - from;
  if (p.words && from == 0 && to == p.dim) {
    const uint32_t words = vec / 16, total = p.heads * words;
    auto at = [&](uint32_t i) {
      return reinterpret_cast<uint4*>(dst + (i / words) * p.stride_head * es) + i % words;
    };
    auto from_src = [&](uint32_t i) {
      return __ldg(reinterpret_cast<const uint4*>(src + (i / words) * vec) + i % words);
    };
    for (uint32_t i = team.rank; i < total; i += 2 * team.size) {
      const uint32_t j = i + team.size;
      const uint4 a = from_src(i);
      const uint4 b = j < total ? from_src(j) : uint4{};
      *at(i) = a;
      if (j < total) *at(j) = b;
    }
    return;
  }
  for (uint32_t i = team.rank; i < p.heads * span; i += team.size) {
    const uint32_t head = i / span, d = from + i % span;
    CopyElement(es, src + head * vec + d * es, dst + (head * p.stride_head + d) * es);
  }
}

// 16 bytes of elements, read and written as one.
union Word {
  uint4 raw;
  uint16_t half[8];
  float single[4];
};

__device__ __forceinline__ float WordGet(int dtype, const Word& w, uint32_t i) {
  if (dtype == 1) return w.single[i];
  return dtype == 2 ? math::F16ToF32(w.half[i]) : math::Bf16ToF32(w.half[i]);
}

__device__ __forceinline__ void WordSet(int dtype, Word& w, uint32_t i, float f) {
  if (dtype == 1)
    w.single[i] = f;
  else
    w.half[i] = dtype == 2 ? math::F32ToF16(f) : math::F32ToBf16(f);
}

// K's rotary dims of every head, 16 bytes at a time (p.rotary_words): a
// thread takes one word of each half (NeoX: pair i is dims i and
// i + rotary/2) or one word of adjacent pairs (interleaved).
__device__ void RotateWords(const Params& p, Team team, const uint8_t* src, uint8_t* dst,
                            const float* cs, const float* sn) {
  const uint32_t es = p.dtype_size, per_word = 16 / es, half = p.rotary / 2;
  const uint32_t words = p.neox ? half / per_word : p.rotary / per_word;  // per head
  for (uint32_t i = team.rank; i < p.heads * words; i += team.size) {
    const uint32_t head = i / words, w = i % words;
    const uint4* s = reinterpret_cast<const uint4*>(src + (head * p.dim + p.offset) * es);
    uint4* d = reinterpret_cast<uint4*>(dst + (head * p.stride_head + p.offset) * es);
    if (p.neox) {
      Word a{__ldg(s + w)}, b{__ldg(s + w + half / per_word)};
      for (uint32_t j = 0; j < per_word; ++j) {
        float x = WordGet(p.dtype, a, j), y = WordGet(p.dtype, b, j);
        math::RotatePair(x, y, cs[w * per_word + j], sn[w * per_word + j]);
        WordSet(p.dtype, a, j, x);
        WordSet(p.dtype, b, j, y);
      }
      d[w] = a.raw;
      d[w + half / per_word] = b.raw;
    } else {
      Word a{__ldg(s + w)};
      for (uint32_t j = 0; j < per_word; j += 2) {
        float x = WordGet(p.dtype, a, j), y = WordGet(p.dtype, a, j + 1);
        const uint32_t pair = (w * per_word + j) / 2;
        math::RotatePair(x, y, cs[pair], sn[pair]);
        WordSet(p.dtype, a, j, x);
        WordSet(p.dtype, a, j + 1, y);
      }
      d[w] = a.raw;
    }
  }
}

// K's rotary dims of every head, a pair per thread (any alignment).
__device__ void RotatePairs(const Params& p, Team team, const uint8_t* src, uint8_t* dst,
                            const float* cs, const float* sn) {
  const uint32_t es = p.dtype_size, half = p.rotary / 2;
  for (uint32_t i = team.rank; i < p.heads * half; i += team.size) {
    const uint32_t head = i / half, pair = i % half;
    uint32_t first, second;
    math::PairIndex(p.neox, p.rotary, pair, first, second);
    const uint8_t* s = src + (head * p.dim + p.offset) * es;
    uint8_t* d = dst + (head * p.stride_head + p.offset) * es;
    float a = Load(p.dtype, s + first * es), b = Load(p.dtype, s + second * es);
    math::RotatePair(a, b, cs[pair], sn[pair]);
    Store(p.dtype, d + first * es, a);
    Store(p.dtype, d + second * es, b);
  }
}

// One block per (token, layer): K's rotary dims rotated in fp32 and rounded
// once, the rest of K and all of V copied; with two planes, the first half
// of the threads writes K and the second V.
__global__ void RemapKernel(Params p) {
  const uint32_t layer = blockIdx.y, t = blockIdx.x;
  const int64_t slot = p.slots[t];
  if (slot < 0) return;
  const int64_t block = slot / p.block_size, off = slot % p.block_size;
  const uint32_t es = p.dtype_size, half = p.rotary / 2;
  const size_t row = size_t{p.dim} * es * p.heads;
  const int spec = p.layer_spec[layer];
  const Team team{threadIdx.x % (blockDim.x / p.planes), blockDim.x / p.planes};
  const uint32_t plane = threadIdx.x / team.size;
  if (plane >= p.planes) return;  // an odd thread out
  const uint8_t* src = p.payload + ((size_t{layer} * p.planes + plane) * p.tokens + t) * row;
  uint8_t* dst = p.layers[layer] +
                 (plane * p.stride_plane + block * p.stride_block + off * p.stride_offset) * es;
  if (plane != 0 || spec < 0) {
    CopyDims(p, team, src, dst, 0, p.dim);
    return;
  }
  const size_t table = (size_t(spec) * (p.per_token ? p.tokens : 1) + (p.per_token ? t : 0)) * half;
  if (p.rotary_words)
    RotateWords(p, team, src, dst, p.cos + table, p.sin + table);
  else
    RotatePairs(p, team, src, dst, p.cos + table, p.sin + table);
  if (p.offset > 0) CopyDims(p, team, src, dst, 0, p.offset);
  if (p.offset + p.rotary < p.dim) CopyDims(p, team, src, dst, p.offset + p.rotary, p.dim);
}

bool Aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

}  // namespace

Status RemapCudaLaunch(const ChunkHeader& h, const uint8_t* device_payload,
                       const int64_t* device_slots, const float* device_cos,
                       const float* device_sin, const RopePlan& rope, const PagedLayout& cache,
                       void* stream, unsigned threads) {
  if (threads == 0) threads = kDefaultThreads;
  if (threads % 64 != 0 || threads > 1024)
    return InvalidArgument("CUDA remap threads per block: a multiple of 64 up to 1024");
  if (cache.layers.size() > kMaxLayers)
    return Unsupported("the CUDA backend handles at most 256 layers");
  if (cache.layers.size() != h.geometry.num_layers)
    return InvalidArgument("chunk and cache have different layer counts");
  if (Status s = rope.Validate(h.geometry.num_layers); !s.ok()) return s;
  if (h.geometry.num_tokens == 0) return Status::Ok();
  Params p{};
  p.payload = device_payload;
  p.slots = device_slots;
  p.cos = device_cos;
  p.sin = device_sin;
  p.dtype_size = static_cast<uint32_t>(DTypeSize(h.geometry.dtype));
  const size_t vec = size_t{h.geometry.head_dim} * p.dtype_size;
  const size_t es = p.dtype_size;
  p.words = vec % 16 == 0 && Aligned16(device_payload) && cache.stride_plane * es % 16 == 0 &&
            cache.stride_block * es % 16 == 0 && cache.stride_offset * es % 16 == 0 &&
            cache.stride_head * es % 16 == 0;
  for (size_t l = 0; l < cache.layers.size(); ++l) {
    p.layers[l] = static_cast<uint8_t*>(cache.layers[l]);
    p.layer_spec[l] = static_cast<int16_t>(rope.SpecIndex(static_cast<uint32_t>(l)));
    p.words = p.words && Aligned16(cache.layers[l]);
  }
  p.tokens = h.geometry.num_tokens;
  p.heads = h.geometry.num_kv_heads;
  p.dim = h.geometry.head_dim;
  p.rotary = rope.main().rotary_dim;
  p.offset = rope.main().rope_offset;
  p.planes = cache.planes();
  p.block_size = cache.block_size;
  p.dtype = static_cast<int>(h.geometry.dtype);
  p.neox = rope.main().style == RopeStyle::kNeox;
  p.per_token = h.k_form == KForm::kPreRope;
  p.stride_plane = cache.stride_plane;
  p.stride_block = cache.stride_block;
  p.stride_offset = cache.stride_offset;
  p.stride_head = cache.stride_head;
  const uint32_t per_word = 16 / p.dtype_size;
  p.rotary_words =
      p.words && p.offset % per_word == 0 && p.rotary % (p.neox ? 2 * per_word : per_word) == 0;
  dim3 grid(h.geometry.num_tokens, h.geometry.num_layers);
  RemapKernel<<<grid, threads, 0, static_cast<cudaStream_t>(stream)>>>(p);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return IoError(std::string("CUDA launch: ") + cudaGetErrorString(err));
  return Status::Ok();
}

}  // namespace pikv::device
