#include "pikv/launch/etcd.h"

#include <csignal>
#include <filesystem>
#include <thread>

#include "pikv/coord/etcd_client.h"
#include "pikv/launch/daemons.h"
#include "pikv/launch/etcd_certs.h"

namespace pikv::launch {

EtcdCluster::EtcdCluster(int members, bool tls) : tls_(tls) {
  for (int i = 0; i < members; ++i) {
    where_.push_back({"127.0.0.1", {}});
    client_ports_.push_back(FreePort());
    peer_ports_.push_back(FreePort());
  }
  members_.resize(members);
}

EtcdCluster::EtcdCluster(std::vector<EtcdMember> members, bool tls)
    : tls_(tls), where_(std::move(members)) {
  client_ports_.assign(where_.size(), 2379);
  peer_ports_.assign(where_.size(), 2380);
  members_.resize(where_.size());
}

std::string EtcdCluster::Url(int i, bool peer) const {
  return (tls_ && !peer ? "https://" : "http://") + where_[i].ip + ":" +
         std::to_string(peer ? peer_ports_[i] : client_ports_[i]);
}

EtcdCluster::~EtcdCluster() {
  for (int i = 0; i < size(); ++i) Kill(i);
}

bool EtcdCluster::Available() { return FindOnPath("etcd").has_value(); }

std::string EtcdCluster::member(int i) const {
  return where_[i].ip + ":" + std::to_string(client_ports_[i]);
}

std::string EtcdCluster::endpoints() const {
  std::string out;
  for (int i = 0; i < size(); ++i) out += (i ? "," : "") + member(i);
  return out;
}

std::string EtcdCluster::tls_dir() const { return tls_ ? dir_.str() + "/tls" : ""; }

std::vector<std::string> EtcdCluster::ControllerArgs() const {
  std::vector<std::string> args = {"--etcd", endpoints()};
  if (tls_) args.insert(args.end(), {"--etcd-tls", tls_dir()});
  return args;
}

std::string EtcdCluster::Spec(const std::string& cluster) const {
  return "etcd://" + endpoints() + (cluster.empty() ? "" : "/" + cluster) +
         (tls_ ? "?tls=" + tls_dir() : "");
}

coord::EtcdAccess EtcdCluster::access() const {
  coord::EtcdAccess access;
  for (int i = 0; i < size(); ++i) access.endpoints.push_back(member(i));
  if (tls_) access.tls = coord::TlsFiles::InDir(tls_dir());
  return access;
}

std::vector<std::string> EtcdCluster::Args(int i) const {
  std::string initial;
  for (int m = 0; m < size(); ++m)
    initial += (m ? "," : "") + ("m" + std::to_string(m)) + "=" + Url(m, true);
  const std::string name = "m" + std::to_string(i);
  std::vector<std::string> args = {"--name",
                                   name,
                                   "--data-dir",
                                   dir_.str() + "/" + name,
                                   "--listen-client-urls",
                                   Url(i, false),
                                   "--advertise-client-urls",
                                   Url(i, false),
                                   "--listen-peer-urls",
                                   Url(i, true),
                                   "--initial-advertise-peer-urls",
                                   Url(i, true),
                                   "--initial-cluster",
                                   initial,
                                   "--initial-cluster-token",
                                   "pikv-test",
                                   "--initial-cluster-state",
                                   "new",
                                   "--heartbeat-interval",
                                   "100",
                                   "--election-timeout",
                                   "1000",
                                   "--logger",
                                   "zap",
                                   "--log-outputs",
                                   dir_.str() + "/" + name + ".log"};
  if (tls_) {
    const std::string tls = tls_dir();
    args.insert(args.end(), {"--cert-file", tls + "/server.crt", "--key-file", tls + "/server.key",
                             "--client-cert-auth", "--trusted-ca-file", tls + "/ca.crt"});
  }
  return args;
}

Status EtcdCluster::StartMember(int i) {
  if (client_ports_[i] == 0 || peer_ports_[i] == 0) return Unavailable("no free port for etcd");
  std::vector<std::string> args = Args(i);
  std::string program = "etcd";
  if (!where_[i].prefix.empty()) {
    program = where_[i].prefix.front();
    std::vector<std::string> all(where_[i].prefix.begin() + 1, where_[i].prefix.end());
    all.push_back(FindOnPath("etcd").value_or("etcd"));
    all.insert(all.end(), args.begin(), args.end());
    args = std::move(all);
  }
  try {
    members_[i] = std::make_unique<ChildProcess>(program, args);
  } catch (const std::exception& e) {
    return Unavailable(std::string("etcd: ") + e.what());
  }
  return Status::Ok();
}

Status EtcdCluster::Start() {
  if (tls_) {
    std::vector<std::string> names = {"localhost"};
    for (const auto& w : where_) names.push_back(w.ip);
    if (Status s = WriteEtcdCerts(tls_dir(), names); !s.ok()) return s;
  }
  for (int i = 0; i < size(); ++i) {
    if (Status s = StartMember(i); !s.ok()) return s;
  }
  return WaitReady();
}

Status EtcdCluster::Wipe() {
  for (int i = 0; i < size(); ++i) Kill(i);
  for (int i = 0; i < size(); ++i) {
    std::error_code ec;
    std::filesystem::remove_all(dir_.path() / ("m" + std::to_string(i)), ec);
    if (ec) return IoError("cannot remove etcd member " + std::to_string(i) + "'s data");
  }
  for (int i = 0; i < size(); ++i) {
    if (Status s = StartMember(i); !s.ok()) return s;
  }
  return WaitReady();
}

Status EtcdCluster::WaitReady() {
  // Ready when a write commits (a quorum has elected an etcd leader).
  coord::EtcdClient client(access(), std::chrono::milliseconds(500));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (client.Put("pikv-test/ready", "1", 0).ok()) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Unavailable("etcd cluster did not come up in 20 s (logs in " + dir_.str() + ")");
}

pid_t EtcdCluster::pid(int i) const { return members_.at(i) ? members_[i]->pid() : -1; }

void EtcdCluster::Kill(int i) {
  if (!members_[i]) return;
  members_[i]->Signal(SIGKILL);
  members_[i]->Wait(std::chrono::seconds(5));
  members_[i].reset();
}

void EtcdCluster::Pause(int i) {
  if (members_[i]) members_[i]->Signal(SIGSTOP);
}

void EtcdCluster::Resume(int i) {
  if (members_[i]) members_[i]->Signal(SIGCONT);
}

}  // namespace pikv::launch
