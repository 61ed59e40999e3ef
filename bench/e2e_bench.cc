// e2e_bench: a RAG trace through two engines on two nodes.
//
// A real controller, two pikv-nodes and a redis-server; an engine on each
// node (the reference model behind a pikv Client, tests/support/
// engine_harness.h). The trace: --docs documents of 64-192 tokens with Zipf
// popularity (s = 1.0), 3-8 distinct documents per prompt in random order
// after one of 3 system prompts, then a 16-token question; prompts alternate
// between the two engines. Reported: where each chunk came from (local, peer,
// remote tier, computed), prompt tokens computed vs total, the hit path's time
// (plan + fetch + remap) per reused token as a fraction of the model's compute
// time per computed token, and the exactness of sampled answers against a
// from-scratch forward pass. Beside pikv's reuse, what a prefix cache would
// give on the same trace (PrefixReuse). Prints a table, then one JSON line.
#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>
#include <random>
#include <unordered_set>

#include "bench_util.h"
#include "pikv/engine/demo_engine.h"
#include "pikv/proto/checksum.h"
#include "test_support.h"

namespace pikv::bench {
namespace {

using Tokens = std::vector<int32_t>;

// The tokens a prefix cache computes on the same prompts: each prompt's
// tokens hashed in blocks of `block` tokens, each block's key chained on
// the key before it, so a block is found only after the same whole prefix.
// This is the key scheme of vLLM's prefix caching (16-token blocks, what
// Mooncake Store keeps behind vLLM) and of LMCache (256-token chunks). The
// cache is shared by both engines and never evicts (the peers' best case);
// a prompt reuses its longest cached run of whole blocks and computes the
// rest, at least its last token (an engine needs that token's logits).
class PrefixReuse {
 public:
  explicit PrefixReuse(size_t block) : block_(block) {}

  void Add(const client::ChunkedPrompt& prompt) {
    Tokens tokens;
    for (const auto& s : prompt.segments) tokens.insert(tokens.end(), s.begin(), s.end());
    uint64_t key = 0;
    size_t reused = 0;
    bool hit = true;
    for (size_t b = 0; (b + 1) * block_ <= tokens.size(); ++b) {
      const auto* run = reinterpret_cast<const uint8_t*>(tokens.data() + b * block_);
      const uint64_t block_key = Xxh3({run, block_ * sizeof(int32_t)});
      key = block_key ^ (key * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL);
      hit = hit && cached_.count(key);
      if (hit) reused = (b + 1) * block_;
      cached_.insert(key);
    }
    total += tokens.size();
    computed += tokens.size() - std::min(reused, tokens.size() - 1);
  }
  uint64_t total = 0, computed = 0;

 private:
  size_t block_;
  std::unordered_set<uint64_t> cached_;
};

int Run(int prompts, int docs, uint64_t seed, int check_every) {
  const engine::ModelConfig cfg = engine::DemoModelConfig();
  engine::ReferenceModel model(cfg);

  testing::TempDir dir_a, dir_b;
  testing::RedisServer redis;
  auto ctl = testing::StartController(
      {"--endpoint", "tcp://127.0.0.1:*", "--http", "", "--log-level", "error"});
  auto node = [&](const testing::TempDir& d, const std::string& id) {
    return testing::StartNode({"--endpoint", "tcp://127.0.0.1:*", "--endpoint",
                               "ipc://" + d.str() + "/n.sock", "--data-dir", d.str(), "--node-id",
                               id, "--host", "host-" + id, "--controller", ctl.endpoint, "--redis",
                               redis.address(), "--heartbeat-interval", "200ms", "--log-level",
                               "error"});
  };
  auto na = node(dir_a, "a"), nb = node(dir_b, "b");
  auto options = [&](const testing::NodeProcess& n, const std::string& host) {
    return engine::ReferenceClientOptions(cfg, "reference-bench", n.ipc, ctl.endpoint, host);
  };
  engine::Engine engines[2] = {engine::Engine(model, options(na, "host-a")),
                               engine::Engine(model, options(nb, "host-b"))};

  engine::RagTrace trace(cfg.vocab, docs, seed);

  engine::Tally tally;
  PrefixReuse prefix16(16), prefix256(256);
  double worst_error = 0;
  int checked = 0;
  for (int p = 0; p < prompts; ++p) {
    const client::ChunkedPrompt prompt = trace.Next();
    auto answer = engines[p % 2].Run(prompt);
    tally.Add(prompt, answer);
    prefix16.Add(prompt);
    prefix256.Add(prompt);
    if (check_every > 0 && p % check_every == check_every - 1) {
      auto scratch = engine::ScratchLogits(model, prompt);
      for (size_t i = 0; i < scratch.size(); ++i) {
        worst_error = std::max(worst_error, double(std::fabs(scratch[i] - answer.logits[i])));
      }
      checked++;
    }
  }
  const uint64_t* by_source = tally.by_source;
  const uint64_t chunks = tally.chunks(), tokens_total = tally.tokens_total,
                 tokens_computed = tally.tokens_computed;
  const double hit_us_per_token = tally.HitPathMicrosPerToken();
  const double compute_us_per_token = tally.ComputeMicrosPerToken();
  Table t({"figure", "value"});
  t.Add({"model", "4 layers, hidden 256, 8 heads / 4 KV heads, head dim 32, fp32"});
  t.Add({"prompts / documents", std::to_string(prompts) + " / " + std::to_string(docs)});
  const char* names[4] = {"chunks from this node", "chunks from a peer (P2P)",
                          "chunks from the Redis tier", "chunks computed"};
  for (int s = 0; s < 4; ++s) {
    t.Add({names[s],
           std::to_string(by_source[s]) + " (" + Fixed(100.0 * by_source[s] / chunks, 1) + " %)"});
  }
  t.Add({"prompt tokens computed / total",
         std::to_string(tokens_computed) + " / " + std::to_string(tokens_total) + " (" +
             Fixed(100.0 * tokens_computed / tokens_total, 1) + " %)"});
  for (const auto* prefix : {&prefix16, &prefix256}) {
    t.Add(
        {"  by a prefix cache, " + std::to_string(prefix == &prefix16 ? 16 : 256) + "-token blocks",
         std::to_string(prefix->computed) + " / " + std::to_string(prefix->total) + " (" +
             Fixed(100.0 * prefix->computed / prefix->total, 1) + " %)"});
  }
  t.Add({"hit path per reused token (plan+fetch+remap)", Fixed(hit_us_per_token, 2) + " us"});
  t.Add({"model compute per computed token", Fixed(compute_us_per_token, 2) + " us"});
  t.Add({"hit path / compute per token", Fixed(hit_us_per_token / compute_us_per_token, 4)});
  t.Add({"answers checked against recompute",
         std::to_string(checked) + ", max |logit error| " + Fixed(worst_error * 1e6, 2) + "e-6"});
  t.Print();
  JsonLine j;
  j.Add("bench", std::string("e2e"));
  j.Add("prompts", prompts);
  j.Add("documents", docs);
  j.Add("hit_rate_local", double(by_source[0]) / chunks);
  j.Add("hit_rate_peer", double(by_source[1]) / chunks);
  j.Add("hit_rate_remote", double(by_source[2]) / chunks);
  j.Add("miss_rate", double(by_source[3]) / chunks);
  j.Add("tokens_computed", double(tokens_computed));
  j.Add("tokens_total", double(tokens_total));
  j.Add("computed_fraction", double(tokens_computed) / tokens_total);
  j.Add("prefix16_computed_fraction", double(prefix16.computed) / prefix16.total);
  j.Add("prefix256_computed_fraction", double(prefix256.computed) / prefix256.total);
  j.Add("hit_path_us_per_token", hit_us_per_token);
  j.Add("compute_us_per_token", compute_us_per_token);
  j.Add("hit_path_vs_compute_per_token", hit_us_per_token / compute_us_per_token);
  j.Add("checked_answers", checked);
  j.Add("max_logit_error", worst_error);
  std::cout << j.str() << std::endl;
  return worst_error <= 1e-4 ? 0 : 1;
}

}  // namespace
}  // namespace pikv::bench

int main(int argc, char** argv) {
  CLI::App app{"pikv end to end: a RAG trace through two engines on two nodes"};
  int prompts = 80, docs = 48, check_every = 10;
  uint64_t seed = 7;
  app.add_option("--prompts", prompts, "Prompts in the trace")->capture_default_str();
  app.add_option("--docs", docs, "Distinct documents")->capture_default_str();
  app.add_option("--check-every", check_every,
                 "Compare every Nth answer with a from-scratch pass (0 = never)")
      ->capture_default_str();
  app.add_option("--seed", seed, "Trace seed")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return pikv::bench::Run(prompts, docs, seed, check_every);
}
