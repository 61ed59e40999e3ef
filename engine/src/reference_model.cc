#include "pikv/engine/reference_model.h"

#include <cmath>
#include <random>

#include "pikv/device/rope_math.h"

namespace pikv::engine {

using namespace pikv::device;  // the model is built from the device part's RoPE and layouts

namespace {

std::vector<float> Random(std::mt19937_64& rng, size_t n, float scale) {
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> w(n);
  for (auto& x : w) x = d(rng);
  return w;
}

// y[n][out] = x[n][in] * w[in][out]
std::vector<float> MatMul(const std::vector<float>& x, const std::vector<float>& w, size_t n,
                          size_t in, size_t out) {
  std::vector<float> y(n * out, 0.f);
  for (size_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < in; ++k) {
      const float a = x[i * in + k];
      const float* row = &w[k * out];
      for (size_t j = 0; j < out; ++j) y[i * out + j] += a * row[j];
    }
  }
  return y;
}

std::vector<float> RmsNorm(const std::vector<float>& x, const std::vector<float>& gain, size_t n,
                           size_t dim) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < n; ++i) {
    double sum = 0;
    for (size_t d = 0; d < dim; ++d) sum += double(x[i * dim + d]) * x[i * dim + d];
    const float inv = 1.f / std::sqrt(static_cast<float>(sum / dim) + 1e-5f);
    for (size_t d = 0; d < dim; ++d) y[i * dim + d] = x[i * dim + d] * inv * gain[d];
  }
  return y;
}

void ApplyRope(const RopeSpec& spec, std::vector<float>& x, size_t n, size_t heads, size_t dim,
               std::span<const int64_t> positions) {
  for (size_t i = 0; i < n; ++i) {
    auto t = Encoding(spec, static_cast<double>(positions[i]));
    for (size_t h = 0; h < heads; ++h) {
      float* v = &x[(i * heads + h) * dim + spec.rope_offset];
      for (uint32_t p = 0; p < spec.rotary_dim / 2; ++p) {
        uint32_t a, b;
        math::PairIndex(spec.style == RopeStyle::kNeox, spec.rotary_dim, p, a, b);
        math::RotatePair(v[a], v[b], t.cos[p], t.sin[p]);
      }
    }
  }
}

}  // namespace

ReferenceModel::ReferenceModel(ModelConfig c) : config_(std::move(c)) {
  std::mt19937_64 rng(config_.seed);
  const size_t h = config_.hidden, hd = config_.head_dim;
  embed_ = Random(rng, size_t{config_.vocab} * h, 1.0f);
  for (uint32_t l = 0; l < config_.layers; ++l) {
    Layer layer;
    layer.attn_norm = std::vector<float>(h, 1.f);
    layer.wq = Random(rng, h * config_.heads * hd, 1.f / std::sqrt(float(h)));
    layer.wk = Random(rng, h * config_.kv_heads * hd, 1.f / std::sqrt(float(h)));
    layer.wv = Random(rng, h * config_.kv_heads * hd, 1.f / std::sqrt(float(h)));
    layer.wo = Random(rng, config_.heads * hd * h, 1.f / std::sqrt(float(config_.heads * hd)));
    layer.mlp_norm = std::vector<float>(h, 1.f);
    layer.w_gate = Random(rng, h * config_.intermediate, 1.f / std::sqrt(float(h)));
    layer.w_up = Random(rng, h * config_.intermediate, 1.f / std::sqrt(float(h)));
    layer.w_down =
        Random(rng, size_t{config_.intermediate} * h, 1.f / std::sqrt(float(config_.intermediate)));
    layers_.push_back(std::move(layer));
  }
  final_norm_ = std::vector<float>(h, 1.f);
  lm_head_ = Random(rng, h * config_.vocab, 1.f / std::sqrt(float(h)));
}

std::vector<float> ReferenceModel::Forward(std::span<const int32_t> tokens,
                                           std::span<const int64_t> positions, const Past& past,
                                           const Mask& mask, std::vector<LayerKv>* kv_out) const {
  const size_t n = tokens.size(), h = config_.hidden, hd = config_.head_dim;
  const size_t H = config_.heads, KV = config_.kv_heads, P = past.slots.size();
  const float scale = 1.f / std::sqrt(float(hd));
  std::vector<float> x(n * h);
  for (size_t i = 0; i < n; ++i) std::copy_n(&embed_[size_t(tokens[i]) * h], h, &x[i * h]);
  if (kv_out) kv_out->assign(config_.layers, {});
  for (uint32_t l = 0; l < config_.layers; ++l) {
    const Layer& w = layers_[l];
    auto a = RmsNorm(x, w.attn_norm, n, h);
    auto q = MatMul(a, w.wq, n, h, H * hd);
    auto k = MatMul(a, w.wk, n, h, KV * hd);
    auto v = MatMul(a, w.wv, n, h, KV * hd);
    if (const RopeSpec* rope = config_.rope.ForLayer(l)) {
      ApplyRope(*rope, q, n, H, hd, positions);
      ApplyRope(*rope, k, n, KV, hd, positions);
    }
    if (kv_out) (*kv_out)[l] = {k, v};
    // Keys: the past (from the paged cache), then the new tokens.
    auto key = [&](size_t j, size_t kvh) -> const float* {
      if (j < P)
        return reinterpret_cast<const float*>(past.cache->HeadVector(l, 0, past.slots[j], kvh));
      return &k[((j - P) * KV + kvh) * hd];
    };
    auto value = [&](size_t j, size_t kvh) -> const float* {
      if (j < P)
        return reinterpret_cast<const float*>(past.cache->HeadVector(l, 1, past.slots[j], kvh));
      return &v[((j - P) * KV + kvh) * hd];
    };
    std::vector<float> attn(n * H * hd, 0.f), scores(P + n);
    for (size_t i = 0; i < n; ++i) {
      for (size_t head = 0; head < H; ++head) {
        const size_t kvh = head / (H / KV);
        const float* qv = &q[(i * H + head) * hd];
        float best = -INFINITY;
        for (size_t j = 0; j < P + n; ++j) {
          if (!mask(i, j)) {
            scores[j] = -INFINITY;
            continue;
          }
          const float* kv = key(j, kvh);
          float dot = 0;
          for (size_t d = 0; d < hd; ++d) dot += qv[d] * kv[d];
          scores[j] = dot * scale;
          best = std::max(best, scores[j]);
        }
        double total = 0;
        for (size_t j = 0; j < P + n; ++j) {
          scores[j] = std::isinf(scores[j]) ? 0.f : std::exp(scores[j] - best);
          total += scores[j];
        }
        float* out = &attn[(i * H + head) * hd];
        for (size_t j = 0; j < P + n; ++j) {
          if (scores[j] == 0.f) continue;
          const float p = static_cast<float>(scores[j] / total);
          const float* vv = value(j, kvh);
          for (size_t d = 0; d < hd; ++d) out[d] += p * vv[d];
        }
      }
    }
    auto o = MatMul(attn, w.wo, n, H * hd, h);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    auto m = RmsNorm(x, w.mlp_norm, n, h);
    auto gate = MatMul(m, w.w_gate, n, h, config_.intermediate);
    auto up = MatMul(m, w.w_up, n, h, config_.intermediate);
    for (size_t i = 0; i < gate.size(); ++i)
      gate[i] = gate[i] / (1.f + std::exp(-gate[i])) * up[i];  // SwiGLU
    auto down = MatMul(gate, w.w_down, n, config_.intermediate, h);
    for (size_t i = 0; i < x.size(); ++i) x[i] += down[i];
  }
  return MatMul(RmsNorm(x, final_norm_, n, h), lm_head_, n, h, config_.vocab);
}

}  // namespace pikv::engine
