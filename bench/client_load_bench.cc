// client_load_bench: the C++ client's hit path (plan + fetch + remap into a
// paged cache) per loaded token, the baseline bench/python_connector_bench.py
// compares pikv's Python connector against on the same chunks.
//
// Against a running node (and controller): --store first gathers --chunks
// chunks of --tokens tokens out of a paged cache (vLLM flash layout, blocks
// in order) and stores them; then each of --iterations loads plans the prompt
// [chunk 0, ..., chunk n-1, question], fetches every chunk and remaps it at
// its actual position. Chunk c's tokens are 1000 + c * tokens + t, so the
// Python side finds the same keys. Prints a table, then one JSON line.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <iostream>

#include "bench_util.h"
#include "filled_cache.h"
#include "pikv/client/client.h"
#include "pikv/client/client_config.h"
#include "pikv/client/prompt.h"

namespace pikv::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::vector<int32_t>> Segments(int chunks, int tokens) {
  std::vector<std::vector<int32_t>> s;
  for (int c = 0; c < chunks; ++c) {
    s.emplace_back(tokens);
    for (int t = 0; t < tokens; ++t) s.back()[t] = 1000 + c * tokens + t;
  }
  s.push_back({7, 8, 9});  // the question
  return s;
}

int Run(const std::map<std::string, std::string>& settings, int chunks, int tokens, int iterations,
        bool store, uint32_t block_size) {
  auto options = client::LoadClientOptions("", nullptr, settings);
  if (!options.ok()) {
    std::cerr << options.status().ToString() << "\n";
    return 2;
  }
  client::Client client(*options);
  const uint64_t total = uint64_t(chunks) * tokens + 3;
  FilledCache cache(*options, total, block_size);
  const device::PagedLayout& layout = cache.layout;
  const std::vector<int64_t>& all_slots = cache.slots;
  auto segments = Segments(chunks, tokens);
  if (store) {
    for (int c = 0; c < chunks; ++c) {
      std::vector<int64_t> slots(all_slots.begin(), all_slots.begin() + tokens);
      Status s =
          client.StoreFromCache(client.KeyOf(segments[c]), segments[c], layout, slots, 0).get();
      if (!s.ok()) {
        std::cerr << "store chunk " << c << ": " << s.ToString() << "\n";
        return 1;
      }
    }
  }
  auto prompt = client::FromSegments(segments);
  std::vector<double> per_token_ns;
  for (int it = 0; it < iterations; ++it) {
    const auto t0 = Clock::now();
    auto plan = client.MakePlan(*prompt);
    auto objects = client.Fetch(plan);
    uint64_t loaded = 0;
    for (size_t i = 0; i < plan.chunks.size(); ++i) {
      if (!objects[i].ok()) break;
      const auto& c = plan.chunks[i];
      std::span<const int64_t> slots(all_slots.data() + c.actual_start, segments[c.segment].size());
      if (!client.Remap(*objects[i], c, slots, layout).ok()) break;
      loaded += segments[c.segment].size();
    }
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    if (loaded != uint64_t(chunks) * tokens) {
      std::cerr << "iteration " << it << " loaded " << loaded << " tokens: a failed load\n";
      return 1;
    }
    per_token_ns.push_back(ns / double(loaded));
  }
  const double median = Median(per_token_ns);
  Table t({"path", "chunks", "tokens/chunk", "KV bytes/token", "median ns/token", "p90"});
  const uint64_t bytes_per_token = uint64_t(options->num_layers) * layout.planes() *
                                   options->num_kv_heads * options->head_dim *
                                   DTypeSize(options->dtype);
  t.Add({"C++ plan+fetch+remap", std::to_string(chunks), std::to_string(tokens),
         std::to_string(bytes_per_token), Fixed(median, 1), Fixed(Quantile(per_token_ns, 0.9), 1)});
  t.Print();
  JsonLine j;
  j.Add("cxx_ns_per_token", median);
  j.Add("iterations", iterations);
  j.Add("kv_bytes_per_token", double(bytes_per_token));
  std::cout << j.str() << "\n";
  return 0;
}

}  // namespace
}  // namespace pikv::bench

int main(int argc, char** argv) {
  CLI::App app{"C++ client hit path per loaded token"};
  std::string node, controller, model_config, dtype;
  int chunks = 4, tokens = 512, iterations = 10;
  uint32_t block_size = 16;
  bool store = false;
  app.add_option("--local-node", node)->required();
  app.add_option("--controller", controller);
  app.add_option("--model-config", model_config)->required();
  app.add_option("--dtype", dtype);
  app.add_option("--chunks", chunks)->check(CLI::Range(1, 64));
  app.add_option("--tokens", tokens)->check(CLI::Range(1, 65536));
  app.add_option("--iterations", iterations)->check(CLI::Range(1, 100000));
  app.add_option("--block-size", block_size)->check(CLI::Range(1, 1024));
  app.add_flag("--store", store, "Store the chunks first");
  CLI11_PARSE(app, argc, argv);
  std::map<std::string, std::string> settings = {{"local-node", node},
                                                 {"controller", controller},
                                                 {"model-id", "bench"},
                                                 {"model-config", model_config}};
  if (!dtype.empty()) settings["dtype"] = dtype;
  return pikv::bench::Run(settings, chunks, tokens, iterations, store, block_size);
}
