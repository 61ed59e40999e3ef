// `pikv keygen`, `pikv keyring` and `pikv etcd-certs`: the files a secure
// cluster needs (docs/security.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace pikv::cli {

class KeyCommands {
 public:
  explicit KeyCommands(CLI::App& app);  // declares the subcommands
  // The exit status of the one that was parsed; nullopt when none was.
  std::optional<int> Run() const;

 private:
  CLI::App *keygen_, *keyring_, *etcd_certs_;
  std::string key_prefix_, dir_;
  std::vector<std::string> names_;  // node ids, or etcd's host names
};

}  // namespace pikv::cli
