// The fused CUDA remap (device/src/remap_cuda.cu) against the CPU remap's
// portable kernel, on every published model config: f32/f16/bf16, K rotated
// (shifted both ways, up to a million positions) and pre-RoPE, vLLM's flash,
// HND and block-major layouts (MLA: its one latent plane), and a payload
// off the 16-byte alignment (the kernel's element-wise paths). Every written
// element within one unit in the last place of its head vector's largest
// element (nvcc fuses a multiply-add where the portable kernel rounds the
// product: one rounding of it), and nothing outside the written slots
// touched. Label gpu: without a CUDA device every case is skipped, and says so.
#include "pikv/device/remap_cuda.h"

#include <cuda_runtime.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "device_test_util.h"
#include "pikv/device/model_config.h"

namespace pikv::device::testing {
namespace {

constexpr uint32_t kBlock = 4, kBlocks = 5;
const std::vector<int64_t> kSlots = {13, 2, -1, 19, 0, 7, 10};  // one token skipped

bool HaveCuda() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// scripts/gpu-check.sh on a GPU machine: a check that cannot run fails there.
bool GpuRequired() {
  const char* v = std::getenv("PIKV_REQUIRE_GPU");
  return v && std::string(v) == "1";
}

// Device memory freed with its owner; a copy of host bytes.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) {
    EXPECT_EQ(cudaMalloc(&ptr_, bytes ? bytes : 1), cudaSuccess);
  }
  template <class T>
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size() * sizeof(T)) {
    EXPECT_EQ(cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
};

struct Tally {
  size_t elements = 0, bit_equal = 0;
  double worst_units = 0;
};

// Remaps one chunk on the CPU and on the device into caches of `order`
// filled alike, and compares them whole. `misaligned`: the payload one
// element past a 16-byte boundary, so the kernel takes its element-wise
// paths rather than its 16-byte words.
void CompareOne(const ModelSpec& spec, DType dtype, KForm form, int64_t virtual_start,
                int64_t actual_start, PagedLayout::Order order, bool misaligned, Tally& tally,
                const std::string& where) {
  const bool mla = spec.geometry.format == KvFormat::kMla;
  const uint32_t layers = spec.geometry.num_layers, heads = spec.geometry.num_kv_heads,
                 dim = spec.geometry.head_dim;
  FloatKv kv = RandomKv(layers, uint32_t(kSlots.size()), heads, dim, virtual_start + 17);
  auto object = MakeChunk(kv, spec.rope, dtype, form, virtual_start, mla);
  ASSERT_FALSE(object.empty()) << where;
  Cache host(order, dtype, layers, heads, dim, kBlock, kBlocks, mla);
  const size_t layer_bytes = host.layout.ElementsPerLayer() * DTypeSize(dtype);
  RemapOptions portable;
  portable.backend = Backend::kPortable;
  ASSERT_TRUE(Remap(object, spec.rope, actual_start, kSlots, host.layout, portable).ok()) << where;

  auto tables = PrepareRemap(object, spec.rope, actual_start, kSlots, host.layout);
  ASSERT_TRUE(tables.ok()) << where << ": " << tables.status().ToString();
  const size_t skew = misaligned ? DTypeSize(dtype) : 0;
  std::vector<uint8_t> payload(skew, 0);
  payload.insert(payload.end(), object.begin() + tables->header.header_size, object.end());
  DeviceBuffer d_payload(payload), d_slots(kSlots), d_cos(tables->cos), d_sin(tables->sin);
  std::vector<std::unique_ptr<DeviceBuffer>> d_layers;
  PagedLayout device = host.layout;
  device.host = false;
  for (uint32_t l = 0; l < layers; ++l) {
    d_layers.push_back(std::make_unique<DeviceBuffer>(std::vector<uint8_t>(layer_bytes, 0xAB)));
    device.layers[l] = d_layers.back()->as<void>();
  }
  Status s = RemapCudaLaunch(tables->header, d_payload.as<uint8_t>() + skew, d_slots.as<int64_t>(),
                             d_cos.as<float>(), d_sin.as<float>(), spec.rope, device, nullptr);
  ASSERT_TRUE(s.ok()) << where << ": " << s.ToString();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << where;

  const size_t es = DTypeSize(dtype);
  for (uint32_t l = 0; l < layers; ++l) {
    std::vector<uint8_t> got(layer_bytes);
    ASSERT_EQ(cudaMemcpy(got.data(), d_layers[l]->as<void>(), layer_bytes, cudaMemcpyDeviceToHost),
              cudaSuccess);
    // The written head vectors: within a unit; then made equal, so that the
    // rest of the layer must be byte-equal (nothing else written).
    for (int64_t slot : kSlots) {
      if (slot < 0) continue;
      for (uint32_t plane = 0; plane < host.layout.planes(); ++plane) {
        for (uint32_t h = 0; h < heads; ++h) {
          const uint8_t* want = host.layout.HeadVector(l, plane, slot, h);
          uint8_t* have = got.data() + (want - static_cast<const uint8_t*>(host.layout.layers[l]));
          float largest = 0;
          for (uint32_t d = 0; d < dim; ++d)
            largest = std::max({largest, std::fabs(Decode(dtype, want + d * es)),
                                std::fabs(Decode(dtype, have + d * es))});
          const double unit = Ulp(dtype, largest);
          for (uint32_t d = 0; d < dim; ++d) {
            const double a = Decode(dtype, want + d * es), b = Decode(dtype, have + d * es);
            tally.elements++;
            tally.bit_equal += std::memcmp(want + d * es, have + d * es, es) == 0;
            tally.worst_units = std::max(tally.worst_units, std::fabs(a - b) / unit);
          }
          std::memcpy(have, want, dim * es);
        }
      }
    }
    ASSERT_EQ(std::memcmp(got.data(), host.memory[l].data(), layer_bytes), 0)
        << where << ": the kernel wrote outside the chunk's slots (layer " << l << ")";
  }
}

TEST(RemapCudaTest, EveryPublishedConfigEqualsTheCpuRemap) {
  if (!HaveCuda()) {
    if (GpuRequired()) FAIL() << "PIKV_REQUIRE_GPU=1 but the CUDA runtime sees no device";
    GTEST_SKIP() << "no CUDA device on this machine: the GPU checks did not run";
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::cout << "device: " << prop.name << "\n";
  struct Shift {
    KForm form;
    int64_t virtual_start, actual_start;
  };
  const Shift shifts[] = {
      {KForm::kRotated, 1000, 7}, {KForm::kRotated, 0, 1'000'000}, {KForm::kPreRope, 0, 5000}};
  size_t configs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(PIKV_MODEL_CONFIG_DIR)) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    std::stringstream json;
    json << in.rdbuf();
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      ModelConfigOptions options;
      options.dtype = dtype;
      auto spec = ReadModelConfig(json.str(), options, entry.path().string());
      ASSERT_TRUE(spec.ok()) << entry.path() << ": " << spec.status().ToString();
      Tally tally;
      const bool mla = spec->geometry.format == KvFormat::kMla;
      for (const Shift& shift : shifts) {
        for (int variant = 0; variant < 4; ++variant) {  // three orders, then misaligned
          const auto order =
              variant == 3 ? PagedLayout::Order::kFlash : static_cast<PagedLayout::Order>(variant);
          if (mla && order != PagedLayout::Order::kFlash) continue;
          const std::string where =
              entry.path().filename().string() + " " + std::string(DTypeName(dtype)) + " variant " +
              std::to_string(variant) + " v=" + std::to_string(shift.virtual_start);
          CompareOne(*spec, dtype, shift.form, shift.virtual_start, shift.actual_start, order,
                     variant == 3, tally, where);
          if (HasFatalFailure()) return;
        }
      }
      EXPECT_LE(tally.worst_units, 1.0) << entry.path().filename() << " " << DTypeName(dtype);
      std::cout << entry.path().filename().string() << " " << DTypeName(dtype) << ": "
                << tally.bit_equal << "/" << tally.elements << " bit-equal, worst "
                << tally.worst_units << " unit\n";
    }
    ++configs;
  }
  EXPECT_GE(configs, 21u);
}

}  // namespace
}  // namespace pikv::device::testing
