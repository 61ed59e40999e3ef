#include "pikv/device/rope.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

namespace pikv::device {

namespace {

constexpr double kPi = 3.14159265358979323846;

// YaRN's correction range: the dims whose wavelength completes between
// beta_slow and beta_fast rotations over the original context.
double CorrectionDim(double rotations, double dim, double base, double max_pos) {
  return dim * std::log(max_pos / (rotations * 2 * kPi)) / (2 * std::log(base));
}

const char* ScalingName(RopeScaling s) {
  switch (s) {
    case RopeScaling::kNone:
      return "none";
    case RopeScaling::kLinear:
      return "linear";
    case RopeScaling::kLlama3:
      return "llama3";
    case RopeScaling::kNtk:
      return "ntk";
    case RopeScaling::kYarn:
      return "yarn";
    case RopeScaling::kLongRope:
      return "longrope";
  }
  return "?";
}

}  // namespace

Result<RopeSpec> RopeSpec::FromConfigJson(std::string_view text, RopeStyle style) {
  nlohmann::json c = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (c.is_discarded() || !c.is_object())
    return InvalidArgument("model config is not a JSON object");
  RopeSpec s;
  s.style = style;
  try {
    if (c.contains("head_dim")) {
      s.head_dim = c["head_dim"].get<uint32_t>();
    } else if (c.contains("hidden_size") && c.contains("num_attention_heads")) {
      s.head_dim = c["hidden_size"].get<uint32_t>() / c["num_attention_heads"].get<uint32_t>();
    } else {
      return InvalidArgument("config has neither head_dim nor hidden_size and num_attention_heads");
    }
    s.rotary_dim = s.head_dim;
    if (c.contains("partial_rotary_factor")) {
      s.rotary_dim =
          static_cast<uint32_t>(std::lround(s.head_dim * c["partial_rotary_factor"].get<double>()));
    }
    if (c.contains("rope_theta")) s.theta = c["rope_theta"].get<double>();
    const uint32_t max_pos = c.value("max_position_embeddings", 0u);
    const auto& r = c.contains("rope_scaling") ? c["rope_scaling"] : nlohmann::json();
    if (!r.is_null()) {
      std::string type = r.value("rope_type", r.value("type", std::string("default")));
      s.factor = r.value("factor", 1.0);
      s.original_max_position =
          r.value("original_max_position_embeddings", max_pos ? max_pos : 8192u);
      if (type == "default") {
        s.scaling = RopeScaling::kNone;
      } else if (type == "linear") {
        s.scaling = RopeScaling::kLinear;
      } else if (type == "llama3") {
        s.scaling = RopeScaling::kLlama3;
        s.low_freq_factor = r.value("low_freq_factor", 1.0);
        s.high_freq_factor = r.value("high_freq_factor", 4.0);
      } else if (type == "ntk" || type == "static_ntk") {
        s.scaling = RopeScaling::kNtk;
      } else if (type == "yarn") {
        s.scaling = RopeScaling::kYarn;
        s.beta_fast = r.value("beta_fast", 32.0);
        s.beta_slow = r.value("beta_slow", 1.0);
        s.yarn_attention_factor = r.value("attention_factor", 0.0);
      } else if (type == "longrope" || type == "su") {
        s.scaling = RopeScaling::kLongRope;
        s.long_factor = r.value("long_factor", std::vector<double>{});
        s.short_factor = r.value("short_factor", std::vector<double>{});
        s.max_position = max_pos;
      } else if (type == "dynamic") {
        return Unsupported(
            "dynamic NTK scaling depends on the sequence length, so a cached key cannot be "
            "re-rotated exactly");
      } else {
        return Unsupported("unknown rope_scaling type '" + type + "'");
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("model config: ") + e.what());
  }
  if (Status st = s.Validate(); !st.ok()) return st;
  return s;
}

Status RopeSpec::Validate() const {
  if (head_dim == 0) return InvalidArgument("head_dim must be positive");
  if (rotary_dim == 0 || rotary_dim % 2 != 0)
    return InvalidArgument("rotary_dim must be even and positive");
  if (rope_offset + rotary_dim > head_dim) return InvalidArgument("rotary dims exceed head_dim");
  if (!(theta > 1.0)) return InvalidArgument("rope_theta must exceed 1");
  if (scaling != RopeScaling::kNone && !(factor > 0))
    return InvalidArgument("rope scaling factor must be positive");
  if (scaling == RopeScaling::kLlama3 && !(high_freq_factor > low_freq_factor)) {
    return InvalidArgument("llama3 scaling needs high_freq_factor > low_freq_factor");
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
      break;
    case RopeScaling::kLongRope: {
      const auto& f = max_position > original_max_position ? long_factor : short_factor;
      s << ";orig=" << original_max_position << ";max=" << max_position << ";factors=";
      for (double x : f) s << x << ",";
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
        const double smooth = (original_max_position / wavelen - low_freq_factor) /
                              (high_freq_factor - low_freq_factor);
        f = (1 - smooth) * f / factor + smooth * f;
      }
      break;
    }
    case RopeScaling::kYarn: {
      double low = std::floor(CorrectionDim(beta_fast, r, theta, original_max_position));
      double high = std::ceil(CorrectionDim(beta_slow, r, theta, original_max_position));
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
  if (scaling == RopeScaling::kYarn) {
    if (yarn_attention_factor > 0) return yarn_attention_factor;
    return factor > 1 ? 0.1 * std::log(factor) + 1.0 : 1.0;
  }
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
