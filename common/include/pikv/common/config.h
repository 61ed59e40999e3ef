// Config: one process's settings, from defaults, a YAML file, PIKV_*
// environment variables and command-line flags (later layers win: flags,
// then environment, then file, then defaults).
//
// Keys are declared once with a kind, a default, a help line and, for
// numbers, the range they may take (bytes for sizes, milliseconds for
// durations); the typed Declare*s take the default from the options struct
// the setting fills, so it is written once. Every value is parsed and checked
// when it is set, so a bad value or an unknown key fails with the key's name
// and the reason before the process starts. Sizes take
// human units (64GiB), durations too (500ms); lists are YAML sequences or
// comma-separated in the environment. The environment variable of key
// `cpu-capacity` is PIKV_CPU_CAPACITY. Print() shows each effective value and
// where it came from (a secret only as set or not).
// Thread-safety: fill it before starting threads; reads are const.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "pikv/common/status.h"

namespace YAML {
class Node;
}

namespace pikv {

// The values a number setting may take, inclusive; bytes for sizes,
// milliseconds for durations.
struct SettingRange {
  int64_t min = std::numeric_limits<int64_t>::min();
  int64_t max = std::numeric_limits<int64_t>::max();
  bool or_zero = false;  // 0 is allowed too (it means "off")
};

class Config {
 public:
  // kSecret: a string Print() never shows (a password).
  enum class Kind { kString, kSecret, kSize, kDuration, kInt, kBool, kList };
  enum class Source { kDefault, kFile, kEnv, kFlag };

  using Range = SettingRange;

  void Declare(const std::string& key, Kind kind, const std::string& default_value,
               const std::string& help, Range range = {});
  void DeclareInt(const std::string& key, int64_t default_value, const std::string& help,
                  Range range = {});
  void DeclareSize(const std::string& key, uint64_t default_bytes, const std::string& help,
                   Range range = {});
  void DeclareDuration(const std::string& key, std::chrono::milliseconds default_value,
                       const std::string& help, Range range = {});
  void DeclareBool(const std::string& key, bool default_value, const std::string& help);

  Status LoadYamlFile(const std::string& path);
  Status LoadYamlText(const std::string& text, const std::string& origin = "config");
  // Reads PIKV_<KEY> for every declared key; `getenv` is injectable for tests.
  Status LoadEnv(const std::function<const char*(const char*)>& getenv_fn = nullptr);
  Status Set(const std::string& key, const std::string& value, Source source);

  std::string String(const std::string& key) const;
  uint64_t Size(const std::string& key) const;
  std::chrono::milliseconds Duration(const std::string& key) const;
  int64_t Int(const std::string& key) const;
  bool Bool(const std::string& key) const;
  std::vector<std::string> List(const std::string& key) const;
  Source SourceOf(const std::string& key) const;
  Kind KindOf(const std::string& key) const;

  const std::vector<std::string>& keys() const { return order_; }
  // The help line, with the range when the key has one ("... (1 to 64)").
  std::string Help(const std::string& key) const;
  static std::string EnvName(const std::string& key);
  std::string Print() const;

 private:
  Status ApplyYaml(const YAML::Node& root, const std::string& origin);
  struct Entry {
    Kind kind;
    std::string help;
    Range range;
    std::vector<std::string> values;  // one for scalars
    Source source = Source::kDefault;
  };
  static std::string RangeText(const Entry& e);
  Status Check(const std::string& key, const Entry& e,
               const std::vector<std::string>& values) const;
  const Entry& At(const std::string& key) const;

  std::map<std::string, Entry> entries_;
  std::vector<std::string> order_;
};

}  // namespace pikv
