// remap_bench: RoPE remap into a paged KV cache beside memcpy of the same
// bytes into the same destination.
//
// Geometry: Llama-3-8B (32 layers, 8 KV heads, head dim 128, bf16), chunks of
// 1 K and 4 K tokens, vLLM's FlashAttention layout with 16-token blocks and a
// shuffled block table. For 1 thread and all threads: memcpy of every K and V
// head vector into its slot (the baseline), remap (K re-rotated by a nonzero
// shift, V copied), and gather (cache -> chunk object in a reused staging
// buffer, checksum computed in the same pass; single-threaded).
// Bandwidth = payload bytes / time. Each figure is the median of --repeats.
// Prints a table, then one JSON line.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstring>
#include <iostream>
#include <random>
#include <thread>

#include "bench_util.h"
#include "pikv/device/remap.h"

namespace pikv::bench {
namespace {

using Clock = std::chrono::steady_clock;
using device::PagedLayout;

constexpr uint32_t kLayers = 32, kHeads = 8, kDim = 128, kBlock = 16;

struct Setup {
  std::vector<uint8_t> object;
  std::vector<std::vector<uint8_t>> memory;
  PagedLayout cache;
  std::vector<int64_t> slots;
  device::RopeSpec rope;
  uint64_t payload_bytes = 0;
};

Setup Make(uint32_t tokens) {
  Setup s;
  s.rope.head_dim = kDim;
  s.rope.rotary_dim = kDim;
  s.rope.theta = 500000;
  s.rope.scaling = device::RopeScaling::kLlama3;
  s.rope.factor = 8;
  ChunkHeader h;
  h.key = ChunkKey{1, tokens};
  h.model_id = "llama-3-8b";
  h.geometry = {kLayers, tokens, kHeads, kDim, DType::kBF16, KvFormat::kStandard};
  h.rotary_dim = kDim;
  h.rope_theta = s.rope.theta;
  h.rope_spec = s.rope.Signature();
  h.virtual_start = 0;
  h.tokens.assign(tokens, 1);
  std::vector<uint8_t> payload(h.geometry.PayloadBytes());
  std::mt19937_64 rng(tokens);
  for (size_t i = 0; i < payload.size(); i += 2) {
    uint16_t v = static_cast<uint16_t>(0x3c00 + (rng() & 0x3ff));  // finite bf16 values near 1
    std::memcpy(&payload[i], &v, 2);
  }
  s.payload_bytes = payload.size();
  s.object = *BuildChunkObject(h, payload);
  const uint64_t blocks = tokens / kBlock + 8;
  s.cache = PagedLayout::Make(PagedLayout::Order::kFlash, DType::kBF16, KvFormat::kStandard, kHeads,
                              kDim, kBlock, blocks);
  for (uint32_t l = 0; l < kLayers; ++l) {
    s.memory.emplace_back(s.cache.ElementsPerLayer() * 2,
                          0);  // zero-filled: every page touched before timing
    s.cache.layers.push_back(s.memory.back().data());
  }
  std::vector<int64_t> table(blocks);
  for (uint64_t b = 0; b < blocks; ++b) table[b] = static_cast<int64_t>(b);
  std::shuffle(table.begin(), table.end(), rng);
  for (uint32_t t = 0; t < tokens; ++t) s.slots.push_back(table[t / kBlock] * kBlock + t % kBlock);
  return s;
}

// The baseline: the same head vectors into the same slots, no rotation.
void MemcpyScatter(const Setup& s, int threads) {
  auto h = *ParseChunkHeader(s.object);
  const uint8_t* payload = ChunkPayload(s.object, h).data();
  const uint32_t n = h.geometry.num_tokens;
  const size_t vec = kDim * 2, token_bytes = vec * kHeads;
  auto work = [&](uint64_t begin, uint64_t end) {
    for (uint64_t item = begin; item < end; ++item) {
      const uint32_t layer = static_cast<uint32_t>(item / n), t = static_cast<uint32_t>(item % n);
      for (uint32_t plane = 0; plane < 2; ++plane) {
        const uint8_t* src = payload + ((uint64_t{layer} * 2 + plane) * n + t) * token_bytes;
        for (uint32_t head = 0; head < kHeads; ++head) {
          std::memcpy(s.cache.HeadVector(layer, plane, s.slots[t], head), src + head * vec, vec);
        }
      }
    }
  };
  const uint64_t items = uint64_t{kLayers} * n;
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i)
    pool.emplace_back(work, items * i / threads, items * (i + 1) / threads);
  for (auto& t : pool) t.join();
}

template <typename Fn>
double TimeMs(int repeats, Fn fn) {
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = Clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return Median(ms);
}

int Run(int repeats) {
  const int all = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  Table table({"tokens", "threads", "memcpy GB/s", "remap GB/s", "remap/memcpy", "remap ms",
               "gather GB/s"});
  JsonLine json;
  json.Add("bench", std::string("remap"));
  json.Add("backend", std::string(device::Avx2Available() ? "avx2" : "portable"));
  json.Add("threads_all", all);
  for (uint32_t tokens : {1024u, 4096u}) {
    Setup s = Make(tokens);
    const double gb = s.payload_bytes / 1e9;
    for (int threads : {1, all}) {
      const double copy_ms = TimeMs(repeats, [&] { MemcpyScatter(s, threads); });
      const double remap_ms = TimeMs(repeats, [&] {
        Status st = device::Remap(s.object, s.rope, 12345, s.slots, s.cache,
                                  {threads, device::Backend::kAuto});
        if (!st.ok()) throw std::runtime_error(st.ToString());
      });
      // The store path gathers into a reused staging buffer.
      device::GatherSpec spec;
      spec.key = ChunkKey{1, 2};
      spec.model_id = "m";
      spec.tokens = std::vector<int32_t>(tokens, 1);
      std::vector<uint8_t> staging(*device::GatherSize(s.cache, s.slots, s.rope, spec));
      const double gather_ms = TimeMs(repeats, [&] {
        Status st = device::GatherInto(s.cache, s.slots, s.rope, spec, staging);
        if (!st.ok()) throw std::runtime_error(st.ToString());
      });
      const double ratio = copy_ms / remap_ms;
      table.Add({std::to_string(tokens), std::to_string(threads), Fixed(gb / copy_ms * 1e3, 2),
                 Fixed(gb / remap_ms * 1e3, 2), Fixed(ratio, 2), Fixed(remap_ms, 1),
                 Fixed(gb / gather_ms * 1e3, 2)});
      const std::string p = std::to_string(tokens / 1024) + "k_t" + std::to_string(threads);
      json.Add("memcpy_gbps_" + p, gb / copy_ms * 1e3);
      json.Add("remap_gbps_" + p, gb / remap_ms * 1e3);
      json.Add("remap_ms_" + p, remap_ms);
      json.Add("gather_gbps_" + p, gb / gather_ms * 1e3);
      json.Add("remap_vs_memcpy_" + p, ratio);
      if (tokens == 4096 && threads == all) {
        json.Add("remap_vs_memcpy", ratio);
        json.Add("remap_4k_ms", remap_ms);
        json.Add("chunk_4k_bytes", static_cast<double>(s.payload_bytes));
      }
    }
  }
  table.Print();
  std::cout << json.str() << std::endl;
  return 0;
}

}  // namespace
}  // namespace pikv::bench

int main(int argc, char** argv) {
  CLI::App app{"RoPE remap into a paged KV cache beside memcpy"};
  int repeats = 5;
  app.add_option("--repeats", repeats, "Timed repetitions per figure (median reported)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return pikv::bench::Run(repeats);
}
