#include <cuda_runtime.h>

#include "pikv/device/remap_cuda.h"
#include "pikv/device/rope_math.h"

namespace pikv::device {

namespace {

constexpr int kMaxLayers = 256;

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
  int64_t stride_plane, stride_block, stride_offset, stride_head;
};

__device__ float Load(int dtype, const uint8_t* p) {
  uint16_t v;
  switch (dtype) {
    case 1:
      return *reinterpret_cast<const float*>(p);
    case 2:
      memcpy(&v, p, 2);
      return math::F16ToF32(v);
    default:
      memcpy(&v, p, 2);
      return math::Bf16ToF32(v);
  }
}

__device__ void Store(int dtype, uint8_t* p, float f) {
  uint16_t v;
  switch (dtype) {
    case 1:
      *reinterpret_cast<float*>(p) = f;
      return;
    case 2:
      v = math::F32ToF16(f);
      memcpy(p, &v, 2);
      return;
    default:
      v = math::F32ToBf16(f);
      memcpy(p, &v, 2);
      return;
  }
}

// One block per (layer, token); threads stride over head dims.
__global__ void RemapKernel(Params p) {
  const uint32_t layer = blockIdx.y, t = blockIdx.x;
  const int64_t slot = p.slots[t];
  if (slot < 0) return;
  const int64_t block = slot / p.block_size, off = slot % p.block_size;
  const size_t vec = size_t{p.dim} * p.dtype_size, row = vec * p.heads;
  const int spec = p.layer_spec[layer];
  const size_t table =
      (spec < 0 ? 0 : size_t(spec) * (p.per_token ? p.tokens : 1) + (p.per_token ? t : 0)) *
      (p.rotary / 2);
  const float* cs = p.cos + table;
  const float* sn = p.sin + table;
  for (uint32_t plane = 0; plane < p.planes; ++plane) {
    const uint8_t* src_row = p.payload + ((size_t{layer} * p.planes + plane) * p.tokens + t) * row;
    for (uint32_t i = threadIdx.x; i < p.heads * p.dim; i += blockDim.x) {
      const uint32_t head = i / p.dim, d = i % p.dim;
      uint8_t* dst = p.layers[layer] + (plane * p.stride_plane + block * p.stride_block +
                                        off * p.stride_offset + head * p.stride_head) *
                                           p.dtype_size;
      const uint8_t* src = src_row + head * vec;
      const bool rotary = plane == 0 && spec >= 0 && d >= p.offset && d < p.offset + p.rotary;
      if (!rotary) {
        memcpy(dst + d * p.dtype_size, src + d * p.dtype_size, p.dtype_size);
        continue;
      }
      // Each pair is done by the thread owning its first element.
      const uint32_t r = d - p.offset;
      uint32_t pair, first, second;
      if (p.neox) {
        if (r >= p.rotary / 2) continue;
        pair = r;
      } else {
        if (r % 2) continue;
        pair = r / 2;
      }
      math::PairIndex(p.neox, p.rotary, pair, first, second);
      float a = Load(p.dtype, src + (p.offset + first) * p.dtype_size);
      float b = Load(p.dtype, src + (p.offset + second) * p.dtype_size);
      math::RotatePair(a, b, cs[pair], sn[pair]);
      Store(p.dtype, dst + (p.offset + first) * p.dtype_size, a);
      Store(p.dtype, dst + (p.offset + second) * p.dtype_size, b);
    }
  }
}

}  // namespace

Status RemapCudaLaunch(const ChunkHeader& h, const uint8_t* device_payload,
                       const int64_t* device_slots, const float* device_cos,
                       const float* device_sin, const RopePlan& rope, const PagedLayout& cache,
                       void* stream) {
  if (cache.layers.size() > kMaxLayers)
    return Unsupported("the CUDA backend handles at most 256 layers");
  if (cache.layers.size() != h.geometry.num_layers)
    return InvalidArgument("chunk and cache have different layer counts");
  if (Status s = rope.Validate(h.geometry.num_layers); !s.ok()) return s;
  Params p{};
  p.payload = device_payload;
  p.slots = device_slots;
  p.cos = device_cos;
  p.sin = device_sin;
  for (size_t l = 0; l < cache.layers.size(); ++l) {
    p.layers[l] = static_cast<uint8_t*>(cache.layers[l]);
    p.layer_spec[l] = static_cast<int16_t>(rope.SpecIndex(static_cast<uint32_t>(l)));
  }
  p.tokens = h.geometry.num_tokens;
  p.heads = h.geometry.num_kv_heads;
  p.dim = h.geometry.head_dim;
  p.rotary = rope.main().rotary_dim;
  p.offset = rope.main().rope_offset;
  p.planes = cache.planes();
  p.block_size = cache.block_size;
  p.dtype_size = static_cast<uint32_t>(DTypeSize(h.geometry.dtype));
  p.dtype = static_cast<int>(h.geometry.dtype);
  p.neox = rope.main().style == RopeStyle::kNeox;
  p.per_token = h.k_form == KForm::kPreRope;
  p.stride_plane = cache.stride_plane;
  p.stride_block = cache.stride_block;
  p.stride_offset = cache.stride_offset;
  p.stride_head = cache.stride_head;
  dim3 grid(h.geometry.num_tokens, h.geometry.num_layers);
  RemapKernel<<<grid, 256, 0, static_cast<cudaStream_t>(stream)>>>(p);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return IoError(std::string("CUDA launch: ") + cudaGetErrorString(err));
  return Status::Ok();
}

}  // namespace pikv::device
