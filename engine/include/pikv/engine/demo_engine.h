// Engine: an inference engine stand-in for tests, benchmarks and the demo.
// It answers chunked prompts with a pikv Client and the fp32 reference model:
// plan, fetch the hits, compute only the misses (alone, at virtual position 0)
// and store them, remap everything into a paged cache under a shuffled block
// table, and run the question over it. It reports the plan and where the time
// went.
#pragma once

#include <chrono>
#include <random>
#include <vector>

#include "pikv/client/client.h"
#include "pikv/engine/reference_model.h"

namespace pikv::engine {

class Engine {
 public:
  Engine(const engine::ReferenceModel& model, client::ClientOptions options);

  struct Answer {
    client::Plan plan;
    std::vector<float> logits;  // [question token][vocab]
    std::vector<bool> reused;   // per chunk: served from pikv (else computed)
    std::chrono::microseconds plan_time{0}, fetch_time{0}, remap_time{0}, compute_time{0},
        question_time{0}, audit_time{0};
    uint64_t tokens_reused = 0, tokens_computed = 0;
    uint64_t audits = 0, audit_mismatches = 0;  // hits recomputed; found wrong (then not used)
  };
  // Computed misses are stored; a failed store only costs a recompute later.
  // With the client's audit_rate, sampled hits are recomputed and audited.
  Answer Run(const client::ChunkedPrompt& prompt);
  // A chunk's KV computed alone at virtual position 0: the payload a store
  // of it holds ([layer][k|v][token][head][dim], fp32).
  std::vector<float> ComputeAlone(std::span<const int32_t> tokens) const;

  client::Client& client() { return client_; }

 private:
  const engine::ReferenceModel& model_;
  client::Client client_;
};

// Totals over many answers: where chunks came from, tokens, and time.
struct Tally {
  uint64_t by_source[4] =
      {};  // local, peer, remote, computed (a planned hit that failed counts as computed)
  uint64_t tokens_total = 0, tokens_computed = 0, tokens_reused = 0, questions = 0,
           question_tokens = 0;
  std::chrono::microseconds hit_path{0}, compute{0};

  void Add(const client::ChunkedPrompt& prompt, const Engine::Answer& answer);
  uint64_t chunks() const { return by_source[0] + by_source[1] + by_source[2] + by_source[3]; }
  // Hit path (plan + fetch + remap) per reused token, and model time per computed chunk token.
  double HitPathMicrosPerToken() const;
  double ComputeMicrosPerToken() const;
};

// A RAG workload: `docs` documents of 64-192 tokens with Zipf popularity
// (s = 1), prompts of 3-8 distinct documents in random order after one of 3
// system prompts, and a 16-token question. Deterministic for a seed.
class RagTrace {
 public:
  RagTrace(uint32_t vocab, int docs, uint64_t seed);
  client::ChunkedPrompt Next();

 private:
  std::vector<int32_t> Random(size_t n);
  uint32_t vocab_;
  std::mt19937_64 rng_;
  std::vector<std::vector<int32_t>> documents_, systems_;
  std::discrete_distribution<int> popularity_;
};

// Client options whose namespace is `model`'s (fp32 KV, its geometry and
// RoPE), for an engine on `host` next to `local_node`.
client::ClientOptions ReferenceClientOptions(const engine::ModelConfig& model,
                                             const std::string& model_id,
                                             const std::string& local_node,
                                             const std::string& controller,
                                             const std::string& host);

// The reference model used by the demo and e2e_bench: 4 layers, hidden 256,
// 8 heads / 4 KV heads, head dim 32, vocab 512, fp32.
engine::ModelConfig DemoModelConfig();

// The question's logits from scratch under the isolated chunk mask.
std::vector<float> ScratchLogits(const engine::ReferenceModel& model,
                                 const client::ChunkedPrompt& prompt);

}  // namespace pikv::engine
