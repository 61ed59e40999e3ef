#include "pikv/engine/demo_engine.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace pikv::engine {

using namespace pikv::device;  // the model is built from the device part's RoPE and layouts

namespace {

using Clock = std::chrono::steady_clock;

std::span<const uint8_t> AsBytes(const std::vector<float>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)};
}

std::chrono::microseconds Since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t);
}

// A paged fp32 cache for the reference model.
struct Cache {
  std::vector<std::vector<float>> memory;
  device::PagedLayout layout;
  Cache(const engine::ModelConfig& c, uint32_t block, uint64_t blocks) {
    layout = device::PagedLayout::Make(device::PagedLayout::Order::kFlash, DType::kF32,
                                       KvFormat::kStandard, c.kv_heads, c.head_dim, block, blocks);
    for (uint32_t l = 0; l < c.layers; ++l) {
      memory.emplace_back(layout.ElementsPerLayer());
      layout.layers.push_back(memory.back().data());
    }
  }
};

}  // namespace

Engine::Engine(const engine::ReferenceModel& model, client::ClientOptions options)
    : model_(model), client_(std::move(options)) {}

std::vector<float> Engine::ComputeAlone(std::span<const int32_t> tokens) const {
  std::vector<int64_t> pos(tokens.size());
  std::iota(pos.begin(), pos.end(), 0);
  std::vector<engine::ReferenceModel::LayerKv> kv;
  model_.Forward(
      tokens, pos, {}, [](size_t q, size_t k) { return k <= q; }, &kv);
  std::vector<float> payload;
  for (const auto& layer : kv) {
    payload.insert(payload.end(), layer.k.begin(), layer.k.end());
    payload.insert(payload.end(), layer.v.begin(), layer.v.end());
  }
  return payload;
}

Engine::Answer Engine::Run(const client::ChunkedPrompt& prompt) {
  Answer a;
  auto t = Clock::now();
  a.plan = client_.MakePlan(prompt);
  a.plan_time = Since(t);
  t = Clock::now();
  auto objects = client_.Fetch(a.plan);
  a.fetch_time = Since(t);
  const auto& c = model_.config();
  const auto& meta = a.plan.metadata;
  const uint32_t block = 16;
  const uint64_t blocks = meta.num_tokens() / block + 4;
  Cache cache(c, block, blocks);
  std::vector<int64_t> slots(blocks * block);  // a shuffled block table
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937_64(meta.num_tokens()));
  slots.resize(meta.num_tokens());
  for (size_t i = 0; i < a.plan.chunks.size(); ++i) {
    const client::ChunkPlan& chunk = a.plan.chunks[i];
    const auto& tokens = prompt.segments[chunk.segment];
    SharedBuffer object;
    a.reused.push_back(objects[i].ok());
    if (objects[i].ok() && client_.ShouldAudit()) {
      // Recompute the hit and compare: a wrong object is reported (the
      // controller drops it everywhere) and not used; ours is stored instead.
      t = Clock::now();
      const std::vector<float> payload = ComputeAlone(tokens);
      a.audit_time += Since(t);
      auto audited = client_.Audit(*objects[i], chunk, AsBytes(payload));
      a.audits++;
      if (audited.ok() && !audited->finding.match) {
        if (audited->finding.comparable) a.audit_mismatches++;
        a.reused.back() = false;
        objects[i] = NotFound("the audit found the fetched object wrong");
        client_.Store(chunk.key, tokens, 0, AsBytes(payload), &object, chunk.context())
            .IgnoreError();  // lands once the controller's drop has
      }
    }
    if (objects[i].ok()) {
      object = *objects[i];
      a.tokens_reused += tokens.size();
    } else if (object.empty()) {  // a miss: compute it alone at virtual position 0, store it
      t = Clock::now();
      const std::vector<float> payload = ComputeAlone(tokens);
      a.compute_time += Since(t);
      a.tokens_computed += tokens.size();
      client_.Store(chunk.key, tokens, 0, AsBytes(payload), &object, chunk.context())
          .IgnoreError();  // a failed store costs a recompute later
    }
    t = Clock::now();
    const uint32_t start = meta.segment_starts[chunk.segment];
    Status s = client_.Remap(
        object, chunk, std::span<const int64_t>(slots.data() + start, tokens.size()), cache.layout);
    if (!s.ok()) throw std::runtime_error("remap: " + s.ToString());
    if (objects[i].ok()) a.remap_time += Since(t);
  }
  t = Clock::now();
  const uint32_t qs = meta.segment_starts.back();
  engine::ReferenceModel::Past past{&cache.layout,
                                    std::vector<int64_t>(slots.begin(), slots.begin() + qs)};
  std::vector<int64_t> qpos(meta.positions.begin() + qs, meta.positions.end());
  a.logits = model_.Forward(prompt.question(), qpos, past,
                            [&](size_t q, size_t k) { return meta.Allowed(qs + q, k); });
  a.question_time = Since(t);
  return a;
}

void Tally::Add(const client::ChunkedPrompt& prompt, const Engine::Answer& answer) {
  for (size_t i = 0; i < answer.plan.chunks.size(); ++i) {
    by_source[answer.reused[i] ? static_cast<int>(answer.plan.chunks[i].source) : 3]++;
  }
  for (const auto& s : prompt.segments) tokens_total += s.size();
  questions++;
  question_tokens += prompt.question().size();
  tokens_computed += answer.tokens_computed + prompt.question().size();
  tokens_reused += answer.tokens_reused;
  hit_path += answer.plan_time + answer.fetch_time + answer.remap_time;
  compute += answer.compute_time;
}

double Tally::HitPathMicrosPerToken() const {
  return tokens_reused ? static_cast<double>(hit_path.count()) / tokens_reused : 0;
}

double Tally::ComputeMicrosPerToken() const {
  const uint64_t chunk_tokens = tokens_computed - question_tokens;
  return chunk_tokens ? static_cast<double>(compute.count()) / chunk_tokens : 0;
}

RagTrace::RagTrace(uint32_t vocab, int docs, uint64_t seed) : vocab_(vocab), rng_(seed) {
  for (int d = 0; d < docs; ++d) documents_.push_back(Random(64 + rng_() % 129));
  for (int s = 0; s < 3; ++s) systems_.push_back(Random(32));
  std::vector<double> zipf(docs);
  for (int d = 0; d < docs; ++d) zipf[d] = 1.0 / (d + 1);
  popularity_ = std::discrete_distribution<int>(zipf.begin(), zipf.end());
}

std::vector<int32_t> RagTrace::Random(size_t n) {
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng_() % vocab_);
  return t;
}

client::ChunkedPrompt RagTrace::Next() {
  const int k =
      std::min<int>(3 + static_cast<int>(rng_() % 6), static_cast<int>(documents_.size()));
  std::vector<int> chosen;
  while (static_cast<int>(chosen.size()) < k) {
    int d = popularity_(rng_);
    if (std::find(chosen.begin(), chosen.end(), d) == chosen.end()) chosen.push_back(d);
  }
  std::vector<std::vector<int32_t>> segments = {systems_[rng_() % systems_.size()]};
  for (int d : chosen) segments.push_back(documents_[d]);
  segments.push_back(Random(16));
  return *client::FromSegments(std::move(segments));
}

client::ClientOptions ReferenceClientOptions(const engine::ModelConfig& model,
                                             const std::string& model_id,
                                             const std::string& local_node,
                                             const std::string& controller,
                                             const std::string& host) {
  client::ClientOptions o;
  o.local_node = local_node;
  o.controller = controller;
  o.host = host;
  o.model_id = model_id;
  o.dtype = DType::kF32;
  o.num_layers = model.layers;
  o.num_kv_heads = model.kv_heads;
  o.head_dim = model.head_dim;
  o.rope = model.rope;
  return o;
}

engine::ModelConfig DemoModelConfig() {
  engine::ModelConfig c;
  c.vocab = 512;
  c.hidden = 256;
  c.layers = 4;
  c.heads = 8;
  c.kv_heads = 4;
  c.head_dim = 32;
  c.intermediate = 512;
  device::RopeSpec rope;
  rope.head_dim = rope.rotary_dim = 32;
  rope.theta = 10000;
  c.rope = rope;
  return c;
}

std::vector<float> ScratchLogits(const engine::ReferenceModel& model,
                                 const client::ChunkedPrompt& p) {
  auto meta = *device::BuildAttentionMetadata(p.Lengths(), AttentionMode::kIsolated);
  std::vector<int32_t> all;
  for (const auto& s : p.segments) all.insert(all.end(), s.begin(), s.end());
  auto logits = model.Forward(all, meta.positions, {},
                              [&](size_t q, size_t k) { return meta.Allowed(q, k); });
  const size_t tail = p.question().size() * model.config().vocab;
  return std::vector<float>(logits.end() - static_cast<ptrdiff_t>(tail), logits.end());
}

}  // namespace pikv::engine
