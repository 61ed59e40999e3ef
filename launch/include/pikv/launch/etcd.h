// A real etcd cluster (Debian's etcd-server) of N members on free loopback
// ports, data and logs in a temp dir, for tests, benchmarks and local runs
// with standby controllers. Members can be killed, paused and restarted one
// at a time (a restarted member rejoins with its data). By default clients
// reach it over mutual TLS (certificates made in the temp dir by
// etcd_certs.h), as a deployment should (docs/security.md); peers talk
// plaintext among themselves.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "pikv/common/status.h"
#include "pikv/coord/etcd_client.h"
#include "pikv/launch/process.h"

namespace pikv::launch {

// A member on another address (ports 2379 and 2380), started under
// `prefix` (e.g. nsenter into a network namespace).
struct EtcdMember {
  std::string ip;
  std::vector<std::string> prefix;
};

class EtcdCluster {
 public:
  explicit EtcdCluster(int members = 3, bool tls = true);  // on loopback; starts nothing
  explicit EtcdCluster(std::vector<EtcdMember> members, bool tls = true);
  ~EtcdCluster();
  static bool Available();  // etcd is on PATH
  // Starts every member; ready when the cluster answers a write.
  Status Start();
  Status StartMember(int i);
  // Every member killed and started again with no data (its certificates
  // kept): etcd as a new cluster, its revisions from 1. Ready as Start.
  Status Wipe();
  void Kill(int i);   // SIGKILL
  void Pause(int i);  // SIGSTOP
  void Resume(int i);
  int size() const { return static_cast<int>(client_ports_.size()); }
  // "127.0.0.1:p1,127.0.0.1:p2,...": the controller's etcd setting.
  std::string endpoints() const;
  std::string member(int i) const;  // host:port of member i's client URL
  pid_t pid(int i) const;           // member i's process; -1 when it is not running
  std::string tls_dir() const;      // pikv's client certificates; empty: plaintext
  // The controller's flags: --etcd (and --etcd-tls).
  std::vector<std::string> ControllerArgs() const;
  // A controller spec following this cluster's leader:
  // etcd://<endpoints>[/<cluster>][?tls=<dir>].
  std::string Spec(const std::string& cluster = {}) const;
  coord::EtcdAccess access() const;

 private:
  std::vector<std::string> Args(int i) const;
  Status WaitReady();
  std::string Url(int i, bool peer) const;
  TempDir dir_;
  bool tls_ = true;
  std::vector<EtcdMember> where_;
  std::vector<int> client_ports_, peer_ports_;
  std::vector<std::unique_ptr<ChildProcess>> members_;
};

}  // namespace pikv::launch
