// Counters declared once. A MetricFamily names a counter or gauge for every
// reader at the same time: Prometheus (/metrics) and the stats fields (admin
// stats, heartbeats, Python's stats()). The parts that count add a source,
// which reads their own counters into samples of declared families; every
// reader renders from those samples, so no counter is copied by hand or read
// back by name.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace pikv {

enum class MetricKind { kCounter, kGauge };

struct MetricFamily {
  std::string_view metric;  // Prometheus name: pikv_node_requests_total
  MetricKind kind;
  std::string_view help;
  std::string_view label;  // its one label's key; empty: unlabelled
  // Its stats field, "{}" standing for the label's value: "requests.{}".
  std::string_view field;
};

struct MetricSample {
  const MetricFamily* family;
  std::string label;                     // the label's value; empty for an unlabelled family
  std::variant<uint64_t, double> value;  // a count, or a rate or a time
};

// What a source reads into.
class StatsSink {
 public:
  void Add(const MetricFamily& family, uint64_t value) { samples_.push_back({&family, {}, value}); }
  void Add(const MetricFamily& family, std::string_view label, uint64_t value) {
    samples_.push_back({&family, std::string(label), value});
  }
  void AddReal(const MetricFamily& family, double value) {
    samples_.push_back({&family, {}, value});
  }
  std::vector<MetricSample> Take() { return std::move(samples_); }

 private:
  std::vector<MetricSample> samples_;
};

// Prometheus text: every declared family's HELP and TYPE, with its samples
// (a family of a part that is off has none), then any sample of a family not
// declared, under its own header. Label values are escaped.
std::string PrometheusText(std::span<const MetricFamily* const> families,
                           const std::vector<MetricSample>& samples);

// The declared families and the sources that sample them. Sources are added
// before reading starts; reads may then come from any thread, so a source
// reads only what is safe to read concurrently (atomics, locked snapshots).
class StatsRegistry {
 public:
  using Source = std::function<void(StatsSink&)>;

  explicit StatsRegistry(std::span<const MetricFamily* const> families) : families_(families) {}

  void AddSource(Source source) { sources_.push_back(std::move(source)); }

  std::vector<MetricSample> Read() const;
  std::string PrometheusText() const { return pikv::PrometheusText(families_, Read()); }
  // (stats field, value) for every sample; rates and times rounded.
  std::vector<std::pair<std::string, uint64_t>> FieldValues() const;

 private:
  std::span<const MetricFamily* const> families_;
  std::vector<Source> sources_;
};

// Lists of families joined, in order, into one (a part's kAll made of the
// lists its lower parts declare, so a family is listed once, beside itself).
template <size_t... N>
constexpr auto JoinFamilies(const MetricFamily* const (&... lists)[N]) {
  std::array<const MetricFamily*, (N + ...)> all{};
  auto at = all.begin();
  ((at = std::copy(std::begin(lists), std::end(lists), at)), ...);
  return all;
}

// A part declares its families as rows of a .def file (storage_metrics.def,
// node_metrics.def, ...), each row
//   PIKV_METRIC(Name, metric, kind, label, field, help)
// and reads the file twice: once with PIKV_METRIC defined as
// PIKV_DECLARE_FAMILY (a constant per row), once as PIKV_LIST_FAMILY (its
// kAll, in row order: the order /metrics shows them). A new family is then
// its row, and nothing lists it again.
#define PIKV_DECLARE_FAMILY(Name, metric, kind, label, field, help) \
  inline constexpr ::pikv::MetricFamily Name{metric, ::pikv::MetricKind::kind, help, label, field};
#define PIKV_LIST_FAMILY(Name, ...) &Name,

// A label value as Prometheus text needs it: backslash, quote and newline
// escaped (values may come from peers: node ids, engine names).
std::string EscapeLabelValue(std::string_view value);

// The stats field a sample is known by: its family's field, "{}" replaced
// with the sample's label value.
std::string FieldName(const MetricSample& sample);

}  // namespace pikv
