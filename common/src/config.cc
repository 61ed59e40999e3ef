#include "pikv/common/config.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "pikv/common/enum_names.h"
#include "pikv/common/units.h"

namespace pikv {

namespace {

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

constexpr EnumName<Config::Source> kSourceNames[] = {{Config::Source::kDefault, "default"},
                                                     {Config::Source::kFile, "file"},
                                                     {Config::Source::kEnv, "env"},
                                                     {Config::Source::kFlag, "flag"}};
const char* SourceName(Config::Source s) { return NameOf(kSourceNames, s); }

// A number of the key's kind as an operator writes it.
std::string NumberText(Config::Kind kind, int64_t n) {
  if (kind == Config::Kind::kSize && n >= 0) return ByteSizeSetting(static_cast<uint64_t>(n));
  if (kind == Config::Kind::kDuration) return DurationSetting(std::chrono::milliseconds(n));
  return std::to_string(n);
}

// The value of a checked number, as the range is kept (sizes past INT64_MAX
// are past every range's max).
int64_t NumberOf(Config::Kind kind, const std::string& v) {
  switch (kind) {
    case Config::Kind::kSize: {
      const uint64_t bytes = *ParseByteSize(v);
      return bytes > uint64_t{INT64_MAX} ? INT64_MAX : static_cast<int64_t>(bytes);
    }
    case Config::Kind::kDuration:
      return ParseDuration(v)->count();
    default:
      return std::stoll(v);
  }
}

}  // namespace

void Config::Declare(const std::string& key, Kind kind, const std::string& default_value,
                     const std::string& help, Range range) {
  Entry e{
      kind, help, range,
      kind == Kind::kList ? SplitCommas(default_value) : std::vector<std::string>{default_value},
      Source::kDefault};
  // A default its own declaration refuses is this program's bug.
  if (Status s = Check(key, e, e.values); !s.ok())
    throw std::logic_error("default of " + s.message());
  if (!entries_.count(key)) order_.push_back(key);
  entries_[key] = std::move(e);
}

void Config::DeclareInt(const std::string& key, int64_t default_value, const std::string& help,
                        Range range) {
  Declare(key, Kind::kInt, std::to_string(default_value), help, range);
}

void Config::DeclareSize(const std::string& key, uint64_t default_bytes, const std::string& help,
                         Range range) {
  Declare(key, Kind::kSize, ByteSizeSetting(default_bytes), help, range);
}

void Config::DeclareDuration(const std::string& key, std::chrono::milliseconds default_value,
                             const std::string& help, Range range) {
  Declare(key, Kind::kDuration, DurationSetting(default_value), help, range);
}

void Config::DeclareBool(const std::string& key, bool default_value, const std::string& help) {
  Declare(key, Kind::kBool, default_value ? "true" : "false", help);
}

Status Config::Check(const std::string& key, const Entry& e,
                     const std::vector<std::string>& values) const {
  auto bad = [&](const std::string& why) { return InvalidArgument(key + ": " + why); };
  if (e.kind != Kind::kList && values.size() != 1) return bad("expected a single value");
  for (const auto& v : values) {
    switch (e.kind) {
      case Kind::kString:
      case Kind::kSecret:
      case Kind::kList:
        break;
      case Kind::kSize:
        if (auto r = ParseByteSize(v); !r.ok()) return bad(r.status().message());
        break;
      case Kind::kDuration:
        if (auto r = ParseDuration(v); !r.ok()) return bad(r.status().message());
        break;
      case Kind::kInt:
        try {
          size_t used = 0;
          std::stoll(v, &used);
          if (used != v.size()) throw std::invalid_argument(v);
        } catch (const std::exception&) {
          return bad("'" + v + "' is not an integer");
        }
        break;
      case Kind::kBool:
        if (v != "true" && v != "false") return bad("'" + v + "' is not true or false");
        break;
    }
    if (e.kind == Kind::kInt || e.kind == Kind::kSize || e.kind == Kind::kDuration) {
      const int64_t n = NumberOf(e.kind, v);
      const bool off = e.range.or_zero && n == 0;
      if (!off && (n < e.range.min || n > e.range.max))
        return bad("'" + v + "' is not " + RangeText(e));
    }
  }
  return Status::Ok();
}

Status Config::Set(const std::string& key, const std::string& value, Source source) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return InvalidArgument("unknown setting '" + key + "'");
  std::vector<std::string> values =
      it->second.kind == Kind::kList ? SplitCommas(value) : std::vector<std::string>{value};
  if (Status s = Check(key, it->second, values); !s.ok()) return s;
  it->second.values = std::move(values);
  it->second.source = source;
  return Status::Ok();
}

Status Config::LoadYamlFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return InvalidArgument("cannot read config file " + path);
  std::stringstream text;
  text << f.rdbuf();
  return LoadYamlText(text.str(), path);
}

Status Config::LoadYamlText(const std::string& text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(origin + ": " + e.what());
  }
  if (root.IsNull()) return Status::Ok();
  if (!root.IsMap()) return InvalidArgument(origin + ": expected a map of settings");
  // Every conversion below is checked first (a key or list item may be a
  // map or a list); the catch is for what yaml-cpp throws regardless.
  try {
    return ApplyYaml(root, origin);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(origin + ": " + e.what());
  }
}

Status Config::ApplyYaml(const YAML::Node& root, const std::string& origin) {
  for (const auto& kv : root) {
    if (!kv.first.IsScalar())
      return InvalidArgument(origin + ": a setting's name must be a string");
    const std::string key = kv.first.as<std::string>();
    auto it = entries_.find(key);
    if (it == entries_.end()) return InvalidArgument(origin + ": unknown setting '" + key + "'");
    std::vector<std::string> values;
    if (kv.second.IsSequence()) {
      if (it->second.kind != Kind::kList)
        return InvalidArgument(origin + ": " + key + ": expected a single value");
      for (const auto& item : kv.second) {
        if (!item.IsScalar())
          return InvalidArgument(origin + ": " + key + ": list items must be plain values");
        values.push_back(item.as<std::string>());
      }
    } else if (kv.second.IsScalar()) {
      values = it->second.kind == Kind::kList
                   ? SplitCommas(kv.second.as<std::string>())
                   : std::vector<std::string>{kv.second.as<std::string>()};
    } else {
      return InvalidArgument(origin + ": " + key + ": expected a value, not a map");
    }
    if (Status s = Check(key, it->second, values); !s.ok())
      return InvalidArgument(origin + ": " + s.message());
    it->second.values = std::move(values);
    it->second.source = Source::kFile;
  }
  return Status::Ok();
}

std::string Config::EnvName(const std::string& key) {
  std::string name = "PIKV_";
  for (char c : key)
    name += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

Status Config::LoadEnv(const std::function<const char*(const char*)>& getenv_fn) {
  for (const auto& key : order_) {
    const std::string name = EnvName(key);
    const char* v = getenv_fn ? getenv_fn(name.c_str()) : std::getenv(name.c_str());
    if (!v) continue;
    if (Status s = Set(key, v, Source::kEnv); !s.ok())
      return InvalidArgument(name + " (" + s.message() + ")");
  }
  return Status::Ok();
}

const Config::Entry& Config::At(const std::string& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) throw std::logic_error("undeclared setting " + key);
  return it->second;
}

std::string Config::String(const std::string& key) const {
  return At(key).values.empty() ? "" : At(key).values[0];
}
uint64_t Config::Size(const std::string& key) const { return *ParseByteSize(String(key)); }
std::chrono::milliseconds Config::Duration(const std::string& key) const {
  return *ParseDuration(String(key));
}
int64_t Config::Int(const std::string& key) const { return std::stoll(String(key)); }
bool Config::Bool(const std::string& key) const { return String(key) == "true"; }
std::vector<std::string> Config::List(const std::string& key) const { return At(key).values; }
Config::Source Config::SourceOf(const std::string& key) const { return At(key).source; }
Config::Kind Config::KindOf(const std::string& key) const { return At(key).kind; }
std::string Config::RangeText(const Entry& e) {
  const bool has_min = e.range.min != Range{}.min, has_max = e.range.max != Range{}.max;
  std::string text;
  if (has_min && has_max)
    text = NumberText(e.kind, e.range.min) + " to " + NumberText(e.kind, e.range.max);
  else if (has_min)
    text = "at least " + NumberText(e.kind, e.range.min);
  else if (has_max)
    text = "at most " + NumberText(e.kind, e.range.max);
  return e.range.or_zero && !text.empty() ? "0 (off) or " + text : text;
}

std::string Config::Help(const std::string& key) const {
  const Entry& e = At(key);
  const std::string range = RangeText(e);
  return range.empty() ? e.help : e.help + " (" + range + ")";
}

std::string Config::Print() const {
  std::ostringstream out;
  for (const auto& key : order_) {
    const Entry& e = At(key);
    std::string value;
    for (size_t i = 0; i < e.values.size(); ++i) value += (i ? "," : "") + e.values[i];
    if (e.kind == Kind::kSecret && !value.empty()) value = "(set, not shown)";
    out << key << ": " << (value.empty() ? "''" : value) << "    # " << SourceName(e.source)
        << "\n";
  }
  return out.str();
}

}  // namespace pikv
