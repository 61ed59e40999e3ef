#include "pikv/common/stats_registry.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace pikv {

namespace {

void WriteHeader(std::string& out, const MetricFamily& f) {
  out.append("# HELP ").append(f.metric).append(" ").append(f.help).append("\n");
  out.append("# TYPE ").append(f.metric);
  out.append(f.kind == MetricKind::kCounter ? " counter\n" : " gauge\n");
}

void WriteSample(std::string& out, const MetricSample& s) {
  out.append(s.family->metric);
  if (!s.family->label.empty()) {
    out.append("{").append(s.family->label).append("=\"");
    out.append(EscapeLabelValue(s.label)).append("\"}");
  }
  out.append(" ");
  if (const uint64_t* count = std::get_if<uint64_t>(&s.value)) {
    out.append(std::to_string(*count));
  } else {
    char real[32];
    std::snprintf(real, sizeof(real), "%.6g", std::get<double>(s.value));
    out.append(real);
  }
  out.append("\n");
}

}  // namespace

std::vector<MetricSample> StatsRegistry::Read() const {
  StatsSink sink;
  for (const Source& source : sources_) source(sink);
  return sink.Take();
}

std::string PrometheusText(std::span<const MetricFamily* const> families,
                           const std::vector<MetricSample>& samples) {
  std::string out;
  auto write_family = [&](const MetricFamily* family) {
    WriteHeader(out, *family);
    for (const MetricSample& s : samples)
      if (s.family == family) WriteSample(out, s);
  };
  for (const MetricFamily* family : families) write_family(family);
  // Undeclared families still reach /metrics (and a test finds them there).
  std::vector<const MetricFamily*> undeclared;
  for (const MetricSample& s : samples) {
    if (std::find(families.begin(), families.end(), s.family) == families.end() &&
        std::find(undeclared.begin(), undeclared.end(), s.family) == undeclared.end())
      undeclared.push_back(s.family);
  }
  for (const MetricFamily* family : undeclared) write_family(family);
  return out;
}

std::vector<std::pair<std::string, uint64_t>> StatsRegistry::FieldValues() const {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (const MetricSample& s : Read()) {
    const uint64_t* count = std::get_if<uint64_t>(&s.value);
    const double real = count ? 0 : std::get<double>(s.value);
    // A whole number (the fields are integers); a negative or NaN real is 0.
    out.emplace_back(FieldName(s), count                     ? *count
                                   : real > 0 && real < 9e18 ? uint64_t(std::llround(real))
                                                             : 0);
  }
  return out;
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string FieldName(const MetricSample& sample) {
  const std::string_view field = sample.family->field;
  const size_t at = field.find("{}");
  if (at == std::string_view::npos) return std::string(field);
  std::string name(field.substr(0, at));
  name.append(sample.label).append(field.substr(at + 2));
  return name;
}

}  // namespace pikv
