#include "key_commands.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "pikv/launch/etcd_certs.h"
#include "pikv/transport/curve.h"

namespace pikv::cli {

KeyCommands::KeyCommands(CLI::App& app) {
  keygen_ = app.add_subcommand(
      "keygen", "Write a new CurveZMQ key pair: PREFIX.key (secret, mode 0600) and PREFIX.pub");
  keygen_->add_option("prefix", key_prefix_, "Path of the files, without .key / .pub")->required();
  keyring_ = app.add_subcommand(
      "keyring",
      "Write a new cluster's key pairs (controller, admin, engine, node-<id>) and its "
      "keyring into DIR");
  keyring_->add_option("dir", dir_, "An existing directory")->required();
  keyring_->add_option("node-ids", names_, "The nodes' ids")->required();
  etcd_certs_ = app.add_subcommand(
      "etcd-certs",
      "Write a CA, etcd's server certificate and pikv's client certificate into DIR (etcd over "
      "mutual TLS; files already there are kept)");
  etcd_certs_->add_option("dir", dir_, "The directory (made if missing)")->required();
  etcd_certs_->add_option("names", names_, "Host names and addresses clients dial etcd at")
      ->required();
}

std::optional<int> KeyCommands::Run() const {
  if (keygen_->parsed()) {
    auto keys = NewCurveKeyPair();
    Status s = keys.ok() ? WriteCurveKeyPair(*keys, key_prefix_) : keys.status();
    if (!s.ok()) {
      std::cerr << "pikv keygen: " << s.ToString() << "\n";
      return 1;
    }
    std::cout << "wrote " << key_prefix_ << ".key and " << key_prefix_ << ".pub\n"
              << "public key: " << keys->public_key << "\n";
    return 0;
  }
  if (keyring_->parsed()) {
    if (Status s = WriteClusterKeys(dir_, names_); !s.ok()) {
      std::cerr << "pikv keyring: " << s.ToString() << "\n";
      return 1;
    }
    std::cout << "wrote " << dir_ << "/keyring and the key pairs it lists\n";
    return 0;
  }
  if (etcd_certs_->parsed()) {
    if (Status s = launch::WriteEtcdCerts(dir_, names_); !s.ok()) {
      std::cerr << "pikv etcd-certs: " << s.ToString() << "\n";
      return 1;
    }
    std::cout << "wrote " << dir_
              << ": ca.crt, server.crt/.key (etcd's), client.crt/.key (pikv's; etcd-tls: " << dir_
              << ")\n";
    return 0;
  }
  return std::nullopt;
}

}  // namespace pikv::cli
