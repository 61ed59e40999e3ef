// Locator: the controller's locate for the planner, asked on a thread of its
// own, so that a plan waits at most its budget on the controller: an
// engine's scheduler waits on every plan, and a hung or dead controller must
// not stall admissions (it then costs each plan the budget at most, and
// after one silence none at all while Backoff skips it).
//
// An answer that arrives after its plan gave up still serves: replicas it
// names are kept for kAnswerTtl, and later plans of those keys read them
// without asking. Answers in time are not kept: every plan asks, so that
// what it reads is as fresh as the controller's registry.
//
// A plan waits (within its budget) for a locate posted less than a budget
// ago before asking its own; it does not ask behind an older one, nor while
// the controller is backed off after one went unanswered: it then goes on
// local-first.
// Thread-safety: Locate from one thread at a time (the Client's); the
// asking thread is the Locator's own.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backoff.h"
#include "pikv/proto/location.h"
#include "pikv/rpc/admin_client.h"

namespace pikv::client {

class Locator {
 public:
  using Clock = std::chrono::steady_clock;
  // How long a located key's replicas serve later plans: short, since a
  // chunk evicted meanwhile costs its plan a failed fetch (then a recompute).
  static constexpr std::chrono::seconds kAnswerTtl{1};
  static constexpr size_t kMaxKept = 1 << 16;  // keys kept at most (beyond: forgotten)

  enum class Outcome {
    kAnswered,  // every key answered (by the controller within the budget, or kept)
    kNoAnswer,  // asked; no answer within the budget (late, failed or timed out)
    kSkipped,   // not asked: a locate was in flight all the budget, or the controller was
                // silent lately
  };
  struct Answer {
    Outcome outcome = Outcome::kSkipped;
    std::vector<std::vector<Replica>> replicas;  // per key; empty where nothing is known
  };

  // `controller` is used only on the Locator's thread; `host` is the
  // client's (the controller orders replicas cheapest first for it).
  Locator(std::unique_ptr<rpc::AdminClient> controller, std::string host);
  ~Locator();
  Locator(const Locator&) = delete;
  Locator& operator=(const Locator&) = delete;

  // The replicas of `keys`, waiting at most `budget` for the controller.
  Answer Locate(const std::vector<ChunkKey>& keys, std::chrono::milliseconds budget);

 private:
  struct Kept {
    std::vector<Replica> replicas;
    Clock::time_point until;
  };
  void Run();  // the asking thread
  // The controller's locate; an exception thrown is a failed locate.
  Result<std::vector<std::vector<Replica>>> Ask(const std::vector<ChunkKey>& keys);
  void Keep(const std::vector<ChunkKey>& keys, const std::vector<std::vector<Replica>>& replicas,
            Clock::time_point now);

  std::unique_ptr<rpc::AdminClient> controller_;
  const std::string host_;
  mutable std::mutex mu_;
  std::condition_variable wake_;  // a job for the thread, a job done, or stop
  bool stop_ = false;
  bool busy_ = true;                             // a job (first: the dial) not yet done
  Clock::time_point busy_since_ = Clock::now();  // when it was posted
  std::vector<ChunkKey> job_;                    // the keys to locate
  uint64_t posted_ = 0, finished_ = 0;           // jobs posted and finished
  uint64_t gave_up_ = 0;                         // the last job whose plan stopped waiting for it
  Result<std::vector<std::vector<Replica>>> last_ = Unavailable("none yet");  // job finished_'s
  Backoff backoff_{std::chrono::seconds(1), std::chrono::seconds(16)};
  std::unordered_map<ChunkKey, Kept, ChunkKeyHash> kept_;
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace pikv::client
