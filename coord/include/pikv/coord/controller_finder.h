// ControllerFinder: which controller to talk to, for everything that dials
// one (node reporters and pullers, the client library, `pikv admin`, the
// Python package). A spec is
//   tcp://h:7300                       one controller (nothing to follow)
//   tcp://a:7300,tcp://b:7300,...      any of these; standbys name the leader
//   etcd://h1:2379,h2:2379[/cluster]   the leader as etcd names it (cluster
//                                      default "pikv")
// Current() is the endpoint to use now. A caller reports what happened:
// Redirect(leader) when a controller answered kNotLeader (naming the leader,
// or nobody), Failed(endpoint) when it did not answer; the finder then moves
// on (the next listed controller, or etcd read again, at most every
// `reread` so a leaderless cluster is not hammered).
// Thread-safety: every method from any thread; etcd is read outside the lock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pikv/common/status.h"

namespace pikv::coord {

// Whether the controllers `spec` names are dialled over tcp (so over CURVE
// when security is on): every etcd-elected one is.
bool DialsTcp(const std::string& spec);

class ControllerFinder {
 public:
  static Result<std::shared_ptr<ControllerFinder>> Parse(
      const std::string& spec, std::chrono::milliseconds reread = std::chrono::milliseconds(100));

  // The controller to use now; empty while none is known (etcd names no
  // leader, or cannot be read).
  std::string Current();
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
  std::string ReadEtcd();

  std::string spec_;
  std::vector<std::string> listed_;  // tcp/ipc endpoints of a list spec
  std::vector<std::string> etcd_;    // host:port of an etcd spec
  std::string cluster_;
  std::chrono::milliseconds reread_{100};
  std::mutex mu_;
  std::string current_;  // guarded by mu_
  size_t next_ = 0;      // guarded by mu_: the listed endpoint to try after current_
  std::chrono::steady_clock::time_point read_at_{};  // guarded by mu_: last etcd read
  size_t first_member_ = 0;                          // guarded by mu_: etcd member asked first
  int64_t max_epoch_ = 0;                            // guarded by mu_: newest leader epoch seen
  std::atomic<bool> redirected_{false};
};

}  // namespace pikv::coord
