// remap_cuda_bench: the fused CUDA remap (K re-rotated, V copied, straight
// into vLLM's paged flash layout through a shuffled block table) beside a
// device-to-device copy of the same bytes (cudaMemcpyAsync, contiguous).
//
//   remap_cuda_bench [--config tests/device/model_configs/llama-3.1-8b.json]
//                    [--iterations 20]
//
// For chunks of 1 K and 4 K tokens, K rotated (one rotation per layer spec)
// and pre-RoPE (one per token), and 4 K rotated at 64 and 256 threads per
// block beside the default 128: the median of --iterations timed launches
// (CUDA events) after a warm-up. Bandwidth = payload bytes / time; the copy
// moves the same bytes. Without a CUDA device it says so and prints a JSON
// line with "skipped". Prints a table, then one JSON line.
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "bench_util.h"
#include "pikv/device/model_config.h"
#include "pikv/device/remap.h"
#include "pikv/device/remap_cuda.h"
#include "pikv/device/rope_math.h"

namespace pikv::bench {
namespace {

using device::PagedLayout;
constexpr uint32_t kBlock = 16;

#define CUDA_OK(call)                                                            \
  do {                                                                           \
    cudaError_t e = (call);                                                      \
    if (e != cudaSuccess)                                                        \
      throw std::runtime_error(#call ": " + std::string(cudaGetErrorString(e))); \
  } while (0)

template <class T>
T* DeviceCopy(const std::vector<T>& host) {
  void* p = nullptr;
  CUDA_OK(cudaMalloc(&p, std::max<size_t>(1, host.size() * sizeof(T))));
  CUDA_OK(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return static_cast<T*>(p);
}

// A chunk object of `tokens` random values of magnitude ~1 in the config's geometry.
std::vector<uint8_t> MakeObject(const device::ModelSpec& spec, uint32_t tokens, KForm form) {
  ChunkHeader h;
  h.key = ChunkKey{1, tokens};
  h.model_id = "bench";
  h.geometry = {spec.geometry.num_layers, tokens,     spec.geometry.num_kv_heads,
                spec.geometry.head_dim,   spec.dtype, spec.geometry.format};
  device::SetHeaderRope(spec.rope, h);
  h.k_form = form;
  h.tokens.assign(tokens, 1);
  std::vector<uint8_t> payload(h.geometry.PayloadBytes());
  std::mt19937_64 rng(tokens);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  const size_t es = DTypeSize(spec.dtype);
  for (size_t i = 0; i < payload.size(); i += es) {
    const float f = u(rng);
    if (es == 4) {
      std::memcpy(&payload[i], &f, 4);
    } else {
      const uint16_t v =
          spec.dtype == DType::kF16 ? device::math::F32ToF16(f) : device::math::F32ToBf16(f);
      std::memcpy(&payload[i], &v, 2);
    }
  }
  auto object = BuildChunkObject(h, payload);
  if (!object.ok()) throw std::runtime_error(object.status().ToString());
  return *object;
}

struct Figures {
  double remap_ms, copy_ms, gb;
};

Figures Measure(const device::ModelSpec& spec, uint32_t tokens, KForm form, int iterations,
                unsigned threads) {
  const auto object = MakeObject(spec, tokens, form);
  const uint64_t blocks = tokens / kBlock + 8;
  PagedLayout cache =
      PagedLayout::Make(PagedLayout::Order::kFlash, spec.dtype, spec.geometry.format,
                        spec.geometry.num_kv_heads, spec.geometry.head_dim, kBlock, blocks);
  cache.host = false;
  const size_t layer_bytes = cache.ElementsPerLayer() * DTypeSize(spec.dtype);
  for (uint32_t l = 0; l < spec.geometry.num_layers; ++l) {
    void* p = nullptr;
    CUDA_OK(cudaMalloc(&p, layer_bytes));
    CUDA_OK(cudaMemset(p, 0, layer_bytes));
    cache.layers.push_back(p);
  }
  std::vector<int64_t> table(blocks), slots;
  for (uint64_t b = 0; b < blocks; ++b) table[b] = static_cast<int64_t>(b);
  std::shuffle(table.begin(), table.end(), std::mt19937_64(7));
  for (uint32_t t = 0; t < tokens; ++t) slots.push_back(table[t / kBlock] * kBlock + t % kBlock);
  auto tables = device::PrepareRemap(object, spec.rope, 12345, slots, cache);
  if (!tables.ok()) throw std::runtime_error(tables.status().ToString());
  const std::vector<uint8_t> payload(object.begin() + tables->header.header_size, object.end());
  uint8_t* d_payload = DeviceCopy(payload);
  uint8_t* d_scratch = nullptr;
  CUDA_OK(cudaMalloc(&d_scratch, payload.size()));
  int64_t* d_slots = DeviceCopy(slots);
  float* d_cos = DeviceCopy(tables->cos);
  float* d_sin = DeviceCopy(tables->sin);

  cudaEvent_t start, stop;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreate(&stop));
  auto time_ms = [&](auto fn) {
    fn();  // warm-up
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<double> ms;
    for (int i = 0; i < iterations; ++i) {
      CUDA_OK(cudaEventRecord(start));
      fn();
      CUDA_OK(cudaEventRecord(stop));
      CUDA_OK(cudaEventSynchronize(stop));
      float took = 0;
      CUDA_OK(cudaEventElapsedTime(&took, start, stop));
      ms.push_back(took);
    }
    return Median(ms);
  };
  Figures f;
  f.gb = payload.size() / 1e9;
  f.remap_ms = time_ms([&] {
    Status s = device::RemapCudaLaunch(tables->header, d_payload, d_slots, d_cos, d_sin, spec.rope,
                                       cache, nullptr, threads);
    if (!s.ok()) throw std::runtime_error(s.ToString());
  });
  f.copy_ms = time_ms([&] {
    CUDA_OK(cudaMemcpyAsync(d_scratch, d_payload, payload.size(), cudaMemcpyDeviceToDevice));
  });
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  for (void* p : cache.layers) cudaFree(p);
  for (void* p :
       {static_cast<void*>(d_payload), static_cast<void*>(d_scratch), static_cast<void*>(d_slots),
        static_cast<void*>(d_cos), static_cast<void*>(d_sin)})
    cudaFree(p);
  return f;
}

int Run(const std::string& config, int iterations) {
  JsonLine json;
  json.Add("bench", std::string("remap_cuda"));
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::cout << "no CUDA device on this machine: nothing measured\n";
    json.Add("skipped", std::string("no CUDA device"));
    std::cout << json.str() << "\n";
    return 0;
  }
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  std::ifstream in(config);
  std::stringstream text;
  text << in.rdbuf();
  auto spec = device::ReadModelConfig(text.str(), {}, config);
  if (!spec.ok()) throw std::runtime_error(spec.status().ToString());
  json.Add("device", std::string(prop.name));
  json.Add("config", std::filesystem::path(config).filename().string());
  Table table({"tokens", "K form", "threads", "copy GB/s", "remap GB/s", "remap/copy", "remap ms"});
  double worst = 1e9;
  struct Case {
    uint32_t tokens;
    KForm form;
    unsigned threads;  // 0: the launch's default
  };
  const Case cases[] = {{1024, KForm::kRotated, 0},  {1024, KForm::kPreRope, 0},
                        {4096, KForm::kRotated, 0},  {4096, KForm::kPreRope, 0},
                        {4096, KForm::kRotated, 64}, {4096, KForm::kRotated, 256}};
  for (const Case& c : cases) {
    const Figures f = Measure(*spec, c.tokens, c.form, iterations, c.threads);
    const double ratio = f.copy_ms / f.remap_ms;
    if (c.threads == 0) worst = std::min(worst, ratio);  // the default is what runs
    const std::string name = c.form == KForm::kRotated ? "rotated" : "pre_rope";
    table.Add({std::to_string(c.tokens), name, c.threads ? std::to_string(c.threads) : "default",
               Fixed(f.gb / f.copy_ms * 1e3, 1), Fixed(f.gb / f.remap_ms * 1e3, 1), Fixed(ratio, 3),
               Fixed(f.remap_ms, 3)});
    const std::string key =
        name + "_" + std::to_string(c.tokens) + (c.threads ? "_t" + std::to_string(c.threads) : "");
    json.Add(key + "_remap_gbps", f.gb / f.remap_ms * 1e3);
    json.Add(key + "_copy_gbps", f.gb / f.copy_ms * 1e3);
    json.Add(key + "_remap_vs_copy", ratio);
  }
  std::cout << prop.name << ", " << std::filesystem::path(config).filename().string()
            << " geometry, vLLM flash layout, 16-token blocks, shuffled block table\n";
  table.Print();
  std::cout << "worst remap/copy: " << Fixed(worst, 3) << " (goal >= 0.8)\n";
  json.Add("worst_remap_vs_copy", worst);
  std::cout << json.str() << "\n";
  return 0;
}

}  // namespace
}  // namespace pikv::bench

int main(int argc, char** argv) {
  CLI::App app{"The fused CUDA remap beside a device-to-device copy of the same bytes"};
  std::string config = PIKV_SOURCE_DIR "/tests/device/model_configs/llama-3.1-8b.json";
  int iterations = 20;
  app.add_option("--config", config, "model config.json (geometry, RoPE, dtype)");
  app.add_option("--iterations", iterations, "timed launches per figure")
      ->check(CLI::Range(1, 10000));
  CLI11_PARSE(app, argc, argv);
  try {
    return pikv::bench::Run(config, iterations);
  } catch (const std::exception& e) {
    std::cerr << "remap_cuda_bench: " << e.what() << "\n";
    return 1;
  }
}
