// ControllerFinder: which controller to talk to, for everything that dials
// one (node reporters and pullers, the client library, `pikv admin`, the
// Python package). A listed spec is
//   tcp://h:7300                       one controller (nothing to follow)
//   tcp://a:7300,tcp://b:7300,...      any of these; standbys name the leader
// and is parsed here. A spec naming an outside authority on who leads
// (`etcd://...`) is parsed by the part that can read it
// (coord::FindControllers), which hands this finder a LeaderSource: the
// engine's client links no etcd code unless its program asks for it.
// Current() is the endpoint to use now; it never waits on the network. A
// caller reports what happened: Redirect(leader) when a controller answered
// kNotLeader (naming the leader, or nobody), Failed(endpoint) when it did
// not answer; the finder then moves on (the next listed controller, or the
// source read again). A source is read by the finder's own thread: at once
// when the leader is not known (at most every `reread`, so a leaderless
// cluster is not hammered), and every second otherwise, so a new leader is
// known before anyone has to ask. Await() waits (without I/O of its own) for
// that thread to name one.
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
#include "pikv/proto/message.h"

namespace pikv {

// Whether the controllers `spec` names are dialled over tcp (so over CURVE
// when security is on): every one an outside authority elects is.
bool DialsTcp(const std::string& spec);

// Who leads, as an outside authority names it (etcd: coord/). Read only by
// the finder's thread; each Read is bounded by the source's own timeout.
class LeaderSource {
 public:
  struct Leader {
    std::string endpoint;  // empty: none named, or the authority unreadable
    int64_t epoch = 0;
  };
  virtual ~LeaderSource() = default;
  virtual Leader Read() = 0;
};

class ControllerFinder {
 public:
  // One endpoint or a comma-separated list; any other scheme is refused.
  static Result<std::shared_ptr<ControllerFinder>> Parse(const std::string& spec);
  // The leader `source` names, read on the finder's own thread.
  static std::shared_ptr<ControllerFinder> Following(
      std::string spec, std::unique_ptr<LeaderSource> source,
      std::chrono::milliseconds reread = std::chrono::milliseconds(100));
  ~ControllerFinder();

  // The controller to use now; empty while none is known (the source names
  // no leader, or cannot be read).
  std::string Current();
  // Current(), or when none is known yet, the first the finder learns
  // before `deadline` (empty if none).
  std::string Await(std::chrono::steady_clock::time_point deadline);
  // `epoch`: the leader's, as the redirecting controller knows it (0:
  // unknown); a redirect to an older leadership than one seen is ignored.
  void Redirect(const std::string& leader, int64_t epoch = 0);
  // A controller's kNotLeader reply, followed (Redirect to the leader and
  // epoch it names); returns the leader named, empty when none is.
  std::string FollowNotLeader(const Header& reply);
  void Failed(const std::string& endpoint);
  // Whether there is a leader to follow (a source, more than one listed, or
  // a redirect away from the one listed).
  bool follows() const { return source_ || listed_.size() > 1 || redirected_; }
  const std::string& spec() const { return spec_; }
  const std::vector<std::string>& listed() const { return listed_; }  // empty with a source

 private:
  ControllerFinder() = default;
  void Refresh();  // the source's thread

  std::string spec_;
  std::vector<std::string> listed_;       // tcp/ipc endpoints of a listed spec
  std::unique_ptr<LeaderSource> source_;  // of a followed spec
  std::chrono::milliseconds reread_{100};
  std::mutex mu_;
  std::condition_variable changed_;  // current_ named, stop_, or a reread asked for
  std::string current_;              // guarded by mu_
  size_t next_ = 0;                  // guarded by mu_: the listed endpoint to try after current_
  int64_t max_epoch_ = 0;            // guarded by mu_: newest leader epoch seen
  bool stop_ = false;                // guarded by mu_
  std::atomic<bool> redirected_{false};
  std::thread refresher_;  // followed specs only
};

// How a program turns a controller spec into a finder: ControllerFinder::Parse
// (listed specs), or coord::FindControllers (etcd:// too).
using FindControllersFn = Result<std::shared_ptr<ControllerFinder>> (*)(const std::string& spec);

}  // namespace pikv
