// ControllerFinder: which controller to talk to, for everything that dials
// one (node reporters and pullers, the client library, `pikv admin`, the
// Python package). A spec is
//   tcp://h:7300                       one controller (nothing to follow)
//   tcp://a:7300,tcp://b:7300,...      any of these; standbys name the leader
//   etcd://h1:2379,h2:2379[/cluster][?tls=DIR]
//                                      the leader as etcd names it (cluster
//                                      default "pikv"); over mutual TLS with
//                                      the certificates in DIR (ca.crt,
//                                      client.crt, client.key)
// Current() is the endpoint to use now; it never waits on the network. A
// caller reports what happened: Redirect(leader) when a controller answered
// kNotLeader (naming the leader, or nobody), Failed(endpoint) when it did
// not answer; the finder then moves on (the next listed controller, or etcd
// read again). etcd is read by the finder's own thread: at once when the
// leader is not known (at most every `reread`, so a leaderless cluster is
// not hammered), and every second otherwise, so a new leader is known
// before anyone has to ask. Await() waits (without I/O of its own) for that
// thread to name one.
// Thread-safety: every method from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pikv/common/status.h"
#include "pikv/coord/etcd_client.h"

namespace pikv::coord {

// Whether the controllers `spec` names are dialled over tcp (so over CURVE
// when security is on): every etcd-elected one is.
bool DialsTcp(const std::string& spec);

class ControllerFinder {
 public:
  static Result<std::shared_ptr<ControllerFinder>> Parse(
      const std::string& spec, std::chrono::milliseconds reread = std::chrono::milliseconds(100));
  ~ControllerFinder();

  // The controller to use now; empty while none is known (etcd names no
  // leader, or cannot be read).
  std::string Current();
  // Current(), or when none is known yet, the first the finder learns
  // before `deadline` (empty if none).
  std::string Await(std::chrono::steady_clock::time_point deadline);
  // `epoch`: the leader's, as the redirecting controller knows it (0:
  // unknown); a redirect to an older leadership than one seen is ignored.
  void Redirect(const std::string& leader, int64_t epoch = 0);
  void Failed(const std::string& endpoint);
  // Whether there is a leader to follow (etcd, more than one listed, or a
  // redirect away from the one listed).
  bool follows() const { return !etcd_.empty() || listed_.size() > 1 || redirected_; }
  const std::string& spec() const { return spec_; }
  const std::vector<std::string>& listed() const { return listed_; }  // empty for etcd

 private:
  ControllerFinder() = default;
  void Refresh();  // the etcd thread

  std::string spec_;
  std::vector<std::string> listed_;  // tcp/ipc endpoints of a list spec
  EtcdAccess etcd_;                  // of an etcd spec
  std::string cluster_;
  std::chrono::milliseconds reread_{100};
  std::mutex mu_;
  std::condition_variable changed_;  // current_ named, stop_, or a reread asked for
  std::string current_;              // guarded by mu_
  size_t next_ = 0;                  // guarded by mu_: the listed endpoint to try after current_
  int64_t max_epoch_ = 0;            // guarded by mu_: newest leader epoch seen
  bool stop_ = false;                // guarded by mu_
  std::atomic<bool> redirected_{false};
  std::thread refresher_;  // etcd specs only
};

}  // namespace pikv::coord
