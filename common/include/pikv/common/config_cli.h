// Glue between Config and a CLI11 command line, for the daemons' main():
// one --<key> flag per declared key (booleans are plain switches), plus
// --config FILE and --print-config. Include only from main.cc files.
#pragma once

#include <CLI/CLI.hpp>
#include <iostream>
#include <map>
#include <optional>
#include <string>

#include "pikv/common/config.h"

namespace pikv {

struct ConfigFlags {
  std::map<std::string, std::string> values;
  std::map<std::string, std::vector<std::string>>
      lists;  // list keys may repeat: --endpoint a --endpoint b
  std::map<std::string, CLI::Option*> options;
  std::string file;
  bool print = false;
};

inline void AddConfigFlags(CLI::App& app, Config& config, ConfigFlags& flags) {
  app.add_option("--config", flags.file,
                 "YAML file of settings (flags and PIKV_* variables override it)");
  app.add_flag("--print-config", flags.print,
               "Print the effective settings and where each came from, then exit");
  for (const auto& key : config.keys()) {
    const std::string help = config.Help(key) + " [env " + Config::EnvName(key) + "]";
    flags.options[key] = config.KindOf(key) == Config::Kind::kList
                             ? app.add_option("--" + key, flags.lists[key], help)
                             : app.add_option("--" + key, flags.values[key], help);
  }
}

// Defaults < file < environment < flags. Bool flags take true/false.
inline Status ApplyConfigLayers(Config& config, const ConfigFlags& flags) {
  if (!flags.file.empty()) {
    if (Status s = config.LoadYamlFile(flags.file); !s.ok()) return s;
  }
  if (Status s = config.LoadEnv(); !s.ok()) return s;
  for (const auto& [key, option] : flags.options) {
    if (option->count() == 0) continue;
    std::string value = flags.values.count(key) ? flags.values.at(key) : std::string();
    if (config.KindOf(key) == Config::Kind::kList) {
      value.clear();
      for (const auto& item : flags.lists.at(key)) value += (value.empty() ? "" : ",") + item;
    }
    if (Status s = config.Set(key, value, Config::Source::kFlag); !s.ok()) {
      return InvalidArgument("--" + s.message());
    }
  }
  return Status::Ok();
}

// A daemon's whole command line, written once: a flag per declared key,
// parsed and layered into `config`; --print-config prints it. Returns the
// exit code when main should return now (--help, --version: 0; a bad flag or
// value: 2, told on stderr as "<program>: ..."; --print-config: 0), nullopt
// to run.
inline std::optional<int> ParseCommandLine(CLI::App& app, Config& config, const char* program,
                                           int argc, char** argv) {
  ConfigFlags flags;
  AddConfigFlags(app, config, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (Status s = ApplyConfigLayers(config, flags); !s.ok()) {
    std::cerr << program << ": " << s.message() << "\n";
    return 2;
  }
  if (flags.print) {
    std::cout << config.Print();
    return 0;
  }
  return std::nullopt;
}

}  // namespace pikv
