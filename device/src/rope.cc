#include "pikv/device/rope.h"

#include <xxhash.h>

#include <cmath>
#include <cstdint>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

#include "config_json.h"
#include "pikv/common/enum_names.h"

namespace pikv::device {

namespace {

constexpr double kPi = 3.14159265358979323846;

// YaRN's correction range: the dims whose wavelength completes between
// beta_slow and beta_fast rotations over the original context.
double CorrectionDim(double rotations, double dim, double base, double max_pos) {
  return dim * std::log(max_pos / (rotations * 2 * kPi)) / (2 * std::log(base));
}

using config_json::Count;
using config_json::CountOr;
using config_json::NumberOr;
using nlohmann::json;

// Each kind's own rope_scaling keys (after factor and the original length).
void ReadLlama3(const json& r, uint32_t /*max_pos*/, RopeSpec& s) {
  s.low_freq_factor = r.value("low_freq_factor", 1.0);
  s.high_freq_factor = r.value("high_freq_factor", 4.0);
}

void ReadYarn(const json& r, uint32_t /*max_pos*/, RopeSpec& s) {
  s.beta_fast = r.value("beta_fast", 32.0);
  s.beta_slow = r.value("beta_slow", 1.0);
  s.yarn_attention_factor = r.value("attention_factor", 0.0);
  s.yarn_mscale = r.value("mscale", 0.0);
  s.yarn_mscale_all_dim = r.value("mscale_all_dim", 0.0);
  s.yarn_truncate = r.value("truncate", true);
}

void ReadLongRope(const json& r, uint32_t max_pos, RopeSpec& s) {
  s.long_factor = r.value("long_factor", std::vector<double>{});
  s.short_factor = r.value("short_factor", std::vector<double>{});
  s.longrope_attention_factor = r.value("attention_factor", 0.0);
  s.max_position = max_pos;
  if (!(s.longrope_attention_factor > 0) && s.original_max_position > 1) {
    // From the config's context extension, as both engines do, whichever
    // factors a deployment's max_model_len later picks.
    const double scale = static_cast<double>(max_pos) / s.original_max_position;
    s.longrope_attention_factor =
        scale > 1 ? std::sqrt(1 + std::log(scale) / std::log(s.original_max_position)) : 1.0;
  }
}

// A rope_scaling type pikv implements: its scaling, the keys it understands
// beyond the common ones, and the reader of those keys (none: it has none).
struct ScalingKind {
  RopeScaling scaling;
  std::set<std::string> keys;
  void (*read)(const json& r, uint32_t max_pos, RopeSpec& s);
};

const ScalingKind* FindScalingKind(const std::string& type) {
  static const std::set<std::string> longrope = {"long_factor", "short_factor", "attention_factor"};
  static const std::map<std::string, ScalingKind> kinds = {
      {"default", {RopeScaling::kNone, {}, nullptr}},
      {"linear", {RopeScaling::kLinear, {}, nullptr}},
      {"llama3", {RopeScaling::kLlama3, {"low_freq_factor", "high_freq_factor"}, ReadLlama3}},
      {"ntk", {RopeScaling::kNtk, {}, nullptr}},
      {"static_ntk", {RopeScaling::kNtk, {}, nullptr}},
      {"yarn",
       {RopeScaling::kYarn,
        {"beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim", "truncate"},
        ReadYarn}},
      {"longrope", {RopeScaling::kLongRope, longrope, ReadLongRope}},
      {"su", {RopeScaling::kLongRope, longrope, ReadLongRope}},
  };
  const auto it = kinds.find(type);
  return it == kinds.end() ? nullptr : &it->second;
}

// Any other key changes the encoding in a way pikv does not implement, so it
// is refused, not ignored.
Status CheckScalingKeys(const json& r, const std::string& type, const ScalingKind& kind) {
  static const std::set<std::string> common = {"type", "rope_type", "factor",
                                               "original_max_position_embeddings"};
  for (const auto& [key, value] : r.items()) {
    if (!common.count(key) && !kind.keys.count(key)) {
      return Unsupported("rope_scaling." + key + " (" + type +
                         ") changes the encoding in a way pikv does not implement");
    }
  }
  return Status::Ok();
}

// head_dim, or hidden / heads (under their GPT-J names too: n_embd, n_head).
Status ReadHeadDim(const json& c, RopeSpec& s) {
  const uint32_t hidden = CountOr(c, "hidden_size", CountOr(c, "n_embd", 0));
  const uint32_t heads = CountOr(c, "num_attention_heads", CountOr(c, "n_head", 0));
  if (c.contains("head_dim") && !c["head_dim"].is_null()) {
    s.head_dim = Count(c["head_dim"], "head_dim");
  } else if (hidden > 0 && heads > 0) {
    if (hidden % heads != 0)
      return InvalidArgument("hidden_size is not a multiple of num_attention_heads");
    s.head_dim = hidden / heads;
  } else {
    return InvalidArgument("config has neither head_dim nor hidden_size and num_attention_heads");
  }
  return Status::Ok();
}

// The rotated part: an absolute rotary_dim (GPT-J), or a fraction of the
// head (partial_rotary_factor; GPT-NeoX/Pythia call it rotary_pct).
Status ReadRotaryDim(const json& c, RopeSpec& s) {
  const int ways =
      c.contains("rotary_dim") + c.contains("partial_rotary_factor") + c.contains("rotary_pct");
  if (ways > 1)
    return InvalidArgument(
        "more than one of rotary_dim, partial_rotary_factor and rotary_pct is given");
  s.rotary_dim = s.head_dim;
  if (c.contains("rotary_dim")) s.rotary_dim = Count(c["rotary_dim"], "rotary_dim");
  for (const char* fraction : {"partial_rotary_factor", "rotary_pct"}) {
    if (c.contains(fraction)) {
      const double f = c[fraction].get<double>();
      if (!(f > 0 && f <= 1)) return InvalidArgument(std::string(fraction) + " must be in (0, 1]");
      // As the engines do: int(head_dim * fraction).
      s.rotary_dim = static_cast<uint32_t>(s.head_dim * f);
    }
  }
  return Status::Ok();
}

Status ReadScaling(const json& c, RopeSpec& s) {
  // Read (and so checked) with or without a rope_scaling.
  const uint32_t max_pos = CountOr(c, "max_position_embeddings", CountOr(c, "n_positions", 0));
  // Phi-3 keeps the pretrained length at the top level, not in rope_scaling.
  const uint32_t top_original = CountOr(c, "original_max_position_embeddings", 0);
  const auto& r = c.contains("rope_scaling") ? c["rope_scaling"] : json();
  if (r.is_null()) return Status::Ok();
  if (!r.is_object()) return InvalidArgument("rope_scaling is not an object");
  const std::string type = r.value("rope_type", r.value("type", std::string("default")));
  const ScalingKind* kind = FindScalingKind(type);
  if (kind) {
    if (Status st = CheckScalingKeys(r, type, *kind); !st.ok()) return st;
  }
  s.factor = r.value("factor", 1.0);
  // A count, never a float cast (1e30 would be undefined behaviour).
  s.original_max_position = CountOr(r, "original_max_position_embeddings",
                                    top_original ? top_original
                                    : max_pos    ? max_pos
                                                 : 8192u);
  if (type == "dynamic") {
    return Unsupported(
        "dynamic NTK scaling depends on the sequence length, so a cached key cannot be "
        "re-rotated exactly");
  }
  if (!kind) return Unsupported("unknown rope_scaling type '" + type + "'");
  s.scaling = kind->scaling;
  if (kind->read) kind->read(r, max_pos, s);
  return Status::Ok();
}

}  // namespace

namespace config_json {

uint32_t Count(const nlohmann::json& v, const std::string& name) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > UINT32_MAX)
    throw std::invalid_argument(name + " must be a non-negative integer");
  return static_cast<uint32_t>(v.get<int64_t>());
}

uint32_t CountOr(const nlohmann::json& c, const char* name, uint32_t fallback) {
  return c.contains(name) && !c[name].is_null() ? Count(c[name], name) : fallback;
}

double NumberOr(const nlohmann::json& c, const char* name, double fallback) {
  return c.contains(name) && !c[name].is_null() ? c[name].get<double>() : fallback;
}

void FlattenRopeParameters(nlohmann::json& c) {
  auto it = c.find("rope_parameters");
  if (it == c.end() || it->is_null()) return;
  if (!it->is_object()) throw std::invalid_argument("rope_parameters is not an object");
  // A null rope_scaling is no scaling given (transformers writes both keys).
  if (c.contains("rope_scaling") && !c["rope_scaling"].is_null())
    throw std::invalid_argument("both rope_scaling and rope_parameters are given");
  c.erase("rope_scaling");
  nlohmann::json scaling = *it;
  if (scaling.contains("full_attention")) scaling = nlohmann::json(scaling["full_attention"]);
  c.erase("rope_parameters");
  if (!scaling.is_object()) return;
  for (const char* key : {"rope_theta", "partial_rotary_factor"}) {
    if (scaling.contains(key)) {
      c[key] = scaling[key];
      scaling.erase(key);
    }
  }
  const std::string type = scaling.value("rope_type", scaling.value("type", std::string()));
  if (!(type == "default" && scaling.size() == 1)) c["rope_scaling"] = scaling;
}

Result<RopeSpec> RopeFromConfig(const nlohmann::json& c, RopeStyle style) {
  RopeSpec s;
  s.style = style;
  try {
    if (c.contains("kv_lora_rank") || c.contains("qk_rope_head_dim")) {
      return Unsupported(
          "kv_lora_rank / qk_rope_head_dim: multi-head latent attention (MLA) keeps its rope "
          "part beside a latent, which pikv cannot place yet");
    }
    if (Status st = ReadHeadDim(c, s); !st.ok()) return st;
    if (Status st = ReadRotaryDim(c, s); !st.ok()) return st;
    s.theta = NumberOr(c, "rope_theta", NumberOr(c, "rotary_emb_base", s.theta));
    if (Status st = ReadScaling(c, s); !st.ok()) return st;
  } catch (const std::exception& e) {  // nlohmann's type errors and Count's
    return InvalidArgument(std::string("model config: ") + e.what());
  }
  if (Status st = s.Validate(); !st.ok()) return st;
  return s;
}

}  // namespace config_json

Result<RopeSpec> RopeSpec::FromConfigJson(std::string_view text, RopeStyle style) {
  nlohmann::json c = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (c.is_discarded() || !c.is_object())
    return InvalidArgument("model config is not a JSON object");
  return config_json::RopeFromConfig(c, style);
}

const char* ScalingName(RopeScaling s) {
  static constexpr EnumName<RopeScaling> kNames[] = {
      {RopeScaling::kNone, "none"},     {RopeScaling::kLinear, "linear"},
      {RopeScaling::kLlama3, "llama3"}, {RopeScaling::kNtk, "ntk"},
      {RopeScaling::kYarn, "yarn"},     {RopeScaling::kLongRope, "longrope"}};
  return NameOf(kNames, s);
}

Status RopeSpec::Validate() const {
  if (head_dim == 0 || head_dim > kMaxHeadDim)
    return InvalidArgument("head_dim must be in 1.." + std::to_string(kMaxHeadDim));
  if (rotary_dim == 0 || rotary_dim % 2 != 0)
    return InvalidArgument("rotary_dim must be even and positive");
  if (rope_offset + rotary_dim > head_dim) return InvalidArgument("rotary dims exceed head_dim");
  if (!(theta > 1.0)) return InvalidArgument("rope_theta must exceed 1");
  if (scaling != RopeScaling::kNone && !(factor > 0))
    return InvalidArgument("rope scaling factor must be positive");
  if (scaling == RopeScaling::kLlama3 && !(high_freq_factor >= low_freq_factor)) {
    return InvalidArgument("llama3 scaling needs high_freq_factor >= low_freq_factor");
  }
  if (scaling == RopeScaling::kLongRope) {
    if (long_factor.size() != rotary_dim / 2 || short_factor.size() != rotary_dim / 2) {
      return InvalidArgument("longrope needs rotary_dim / 2 long and short factors");
    }
  }
  return Status::Ok();
}

std::string RopeSpec::Signature() const {
  std::ostringstream s;
  s.precision(17);
  s << (style == RopeStyle::kNeox ? "neox" : "gptj") << ";head_dim=" << head_dim
    << ";rotary_dim=" << rotary_dim << ";offset=" << rope_offset << ";theta=" << theta
    << ";scaling=" << ScalingName(scaling);
  switch (scaling) {
    case RopeScaling::kNone:
      break;
    case RopeScaling::kLinear:
    case RopeScaling::kNtk:
      s << ";factor=" << factor;
      break;
    case RopeScaling::kLlama3:
      s << ";factor=" << factor << ";low=" << low_freq_factor << ";high=" << high_freq_factor
        << ";orig=" << original_max_position;
      break;
    case RopeScaling::kYarn:
      s << ";factor=" << factor << ";orig=" << original_max_position << ";beta_fast=" << beta_fast
        << ";beta_slow=" << beta_slow << ";attn=" << AttentionScale();
      if (!yarn_truncate) s << ";truncate=0";
      break;
    case RopeScaling::kLongRope: {
      const auto& f = max_position > original_max_position ? long_factor : short_factor;
      // The factors themselves (Phi-3's 48 at 17 digits are about 1 KB) as a
      // 128-bit digest, so that the signature fits a chunk header.
      std::ostringstream text;
      text.precision(17);
      for (double x : f) text << x << ",";
      const std::string factors = text.str();
      const XXH128_hash_t digest = XXH3_128bits(factors.data(), factors.size());
      s << ";orig=" << original_max_position << ";max=" << max_position
        << ";attn=" << AttentionScale() << ";factors=" << f.size() << ":" << std::hex
        << std::setfill('0') << std::setw(16) << digest.high64 << std::setw(16) << digest.low64;
      break;
    }
  }
  return s.str();
}

std::vector<double> RopeSpec::InverseFrequencies() const {
  const uint32_t half = rotary_dim / 2;
  const double r = rotary_dim;
  double base = theta;
  if (scaling == RopeScaling::kNtk) base = theta * std::pow(factor, r / (r - 2));
  std::vector<double> inv(half);
  for (uint32_t i = 0; i < half; ++i) inv[i] = std::pow(base, -2.0 * i / r);
  switch (scaling) {
    case RopeScaling::kNone:
    case RopeScaling::kNtk:
      break;
    case RopeScaling::kLinear:
      for (double& f : inv) f /= factor;
      break;
    case RopeScaling::kLlama3: {
      const double low_wavelen = original_max_position / low_freq_factor;
      const double high_wavelen = original_max_position / high_freq_factor;
      for (double& f : inv) {
        const double wavelen = 2 * kPi / f;
        if (wavelen < high_wavelen) continue;  // high frequency: unchanged
        if (wavelen > low_wavelen) {
          f /= factor;  // low frequency: interpolated
          continue;
        }
        // Equal factors leave no medium band (Llama-4): vLLM takes smooth = 0
        // on its one boundary wavelength, where transformers divides by zero.
        const double smooth = high_freq_factor == low_freq_factor
                                  ? 0.0
                                  : (original_max_position / wavelen - low_freq_factor) /
                                        (high_freq_factor - low_freq_factor);
        f = (1 - smooth) * f / factor + smooth * f;
      }
      break;
    }
    case RopeScaling::kYarn: {
      double low = CorrectionDim(beta_fast, r, theta, original_max_position);
      double high = CorrectionDim(beta_slow, r, theta, original_max_position);
      if (yarn_truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, r - 1);
      if (low == high) high += 0.001;
      for (uint32_t i = 0; i < half; ++i) {
        const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
        const double extrapolation = 1 - ramp;  // 1: keep the original frequency
        inv[i] = inv[i] / factor * (1 - extrapolation) + inv[i] * extrapolation;
      }
      break;
    }
    case RopeScaling::kLongRope: {
      const auto& f = max_position > original_max_position ? long_factor : short_factor;
      for (uint32_t i = 0; i < half; ++i) inv[i] /= f[i];
      break;
    }
  }
  return inv;
}

double RopeSpec::AttentionScale() const {
  // YaRN's magnitude: 0.1 m ln(factor) + 1 (1 for factor <= 1).
  auto get_mscale = [&](double m) { return factor > 1 ? 0.1 * m * std::log(factor) + 1.0 : 1.0; };
  if (scaling == RopeScaling::kYarn) {
    if (yarn_attention_factor > 0) return yarn_attention_factor;
    if (yarn_mscale > 0 && yarn_mscale_all_dim > 0)
      return get_mscale(yarn_mscale) / get_mscale(yarn_mscale_all_dim);
    return get_mscale(1.0);
  }
  if (scaling == RopeScaling::kLongRope && longrope_attention_factor > 0)
    return longrope_attention_factor;
  if (scaling == RopeScaling::kLongRope && max_position > original_max_position) {
    const double scale = static_cast<double>(max_position) / original_max_position;
    return std::sqrt(1 + std::log(scale) / std::log(static_cast<double>(original_max_position)));
  }
  return 1.0;
}

namespace {

RotationTable Table(const RopeSpec& spec, double position, double magnitude) {
  auto inv = spec.InverseFrequencies();
  RotationTable t;
  t.cos.resize(inv.size());
  t.sin.resize(inv.size());
  for (size_t i = 0; i < inv.size(); ++i) {
    const double angle =
        position * inv[i];  // double: at p = 128 K an fp32 angle is off by ~0.008 rad
    t.cos[i] = static_cast<float>(std::cos(angle) * magnitude);
    t.sin[i] = static_cast<float>(std::sin(angle) * magnitude);
  }
  return t;
}

}  // namespace

RotationTable PureRotation(const RopeSpec& spec, double delta) { return Table(spec, delta, 1.0); }
RotationTable Encoding(const RopeSpec& spec, double position) {
  return Table(spec, position, spec.AttentionScale());
}

}  // namespace pikv::device
