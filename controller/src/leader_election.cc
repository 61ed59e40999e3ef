#include "pikv/controller/leader_election.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "pikv/common/guarded_thread.h"

namespace pikv::controller {

namespace {

using std::chrono::milliseconds;

int64_t Ns(Clock::time_point t) { return t.time_since_epoch().count(); }

}  // namespace

struct LeaderElection::Impl {
  std::thread thread;
  std::mutex mu;
  std::condition_variable wake;
  bool stopping = false;  // guarded by mu
  // The leadership as published: an epoch and until when it holds, read
  // together (a reader must never pair one leadership's epoch with
  // another's deadline).
  mutable std::mutex lease_mu;
  int64_t epoch = 0;           // guarded by lease_mu
  int64_t valid_until_ns = 0;  // guarded by lease_mu
  ElectionView view;           // guarded by mu (leader, epoch and lease_left come from the lease)
};

LeaderElection::LeaderElection(ElectionOptions options)
    : options_(std::move(options)), impl_(std::make_unique<Impl>()) {}

Result<std::unique_ptr<LeaderElection>> LeaderElection::Start(ElectionOptions options) {
  if (options.etcd.empty()) return InvalidArgument("leader election needs etcd endpoints");
  if (Status s = coord::CheckClusterName(options.cluster); !s.ok()) return s;
  if (options.ttl < std::chrono::seconds(2) || options.ttl > std::chrono::seconds(60) ||
      options.ttl.count() % 1000 != 0)
    return InvalidArgument("lease TTL must be whole seconds, 2-60");
  if (options.endpoint.empty()) return InvalidArgument("leader election needs this endpoint");
  for (const std::string* s : {&options.endpoint, &options.http}) {
    const bool printable = s->size() <= 512 && std::all_of(s->begin(), s->end(), [](char c) {
                             return c > ' ' && c < 127;
                           });
    if (!printable) return InvalidArgument("advertised address is not printable ASCII: " + *s);
  }
  std::unique_ptr<LeaderElection> e(new LeaderElection(std::move(options)));
  // Without an election thread this controller stops leading when its
  // lease runs out: the epoch is dropped now, and the log says why.
  LeaderElection* self = e.get();
  e->impl_->thread = GuardedThread(
      "election", [self] { self->Run(); },
      [self] {
        std::lock_guard lock(self->impl_->lease_mu);
        self->impl_->epoch = 0;
      });
  return e;
}

LeaderElection::~LeaderElection() { Stop(); }

void LeaderElection::Stop() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int64_t LeaderElection::LeaderEpoch(Clock::time_point now) const {
  std::lock_guard lock(impl_->lease_mu);
  return impl_->epoch != 0 && Ns(now) < impl_->valid_until_ns ? impl_->epoch : 0;
}

ElectionView LeaderElection::View(Clock::time_point now) const {
  std::lock_guard lock(impl_->mu);
  ElectionView v = impl_->view;
  v.epoch = LeaderEpoch(now);
  v.leader = v.epoch != 0;
  if (!v.leader && v.current.endpoint == options_.endpoint) v.current = {};  // its lease ran out
  if (v.leader) {
    v.current = {options_.endpoint, options_.http, v.epoch};
    std::lock_guard lease(impl_->lease_mu);
    v.lease_left = std::chrono::duration_cast<milliseconds>(
        std::chrono::nanoseconds(impl_->valid_until_ns - Ns(now)));
  }
  return v;
}

// The election thread's state and steps. `held` is the epoch of the leader
// key this controller's lease holds (0: none); it leads while it holds one
// and its lease is fresh (valid_until_ns, read by LeaderEpoch). A renewal
// that comes late only pauses leading: the key stayed bound to the lease,
// so nobody else can have led meanwhile, and the same epoch resumes.
class LeaderElection::Campaign {
 public:
  explicit Campaign(LeaderElection& e)
      : e_(e),
        o_(e.options_),
        im_(*e.impl_),
        etcd_(o_.etcd, o_.ttl / 4),
        leader_key_(coord::LeaderKey(o_.cluster)),
        member_key_(coord::MembersPrefix(o_.cluster) + o_.endpoint),
        renew_every_(o_.ttl / 3),
        guard_(std::max<milliseconds>(o_.ttl / 10, milliseconds(100))),
        poll_(std::clamp<milliseconds>(o_.ttl / 20, milliseconds(50), milliseconds(250))) {}

  void Run() {
    for (uint64_t polls = 0;; ++polls) {
      auto now = Clock::now();
      if (lease_ == 0) {
        Grant(now);
      } else if (now >= next_renew_) {
        Renew(now);
      }
      now = Clock::now();
      if (lease_ != 0 && now >= next_poll_) {
        Watch(now);
        if (polls % 4 == 0 || held_ != listed_as_) ListMembers();
        next_poll_ = now + poll_;
      }
      std::unique_lock lock(im_.mu);
      const auto until = lease_ == 0 ? now + poll_ : std::min(next_renew_, next_poll_);
      if (im_.wake.wait_until(lock, until, [&] { return im_.stopping; })) break;
    }
    Publish(0);
    if (lease_ != 0) etcd_.Revoke(lease_).IgnoreError();  // a standby takes over at once
  }

 private:
  void Grant(Clock::time_point now) {
    auto granted = etcd_.GrantLease(o_.ttl.count() / 1000);
    Reachable(granted.ok());
    if (!granted.ok()) {
      spdlog::debug("election: no lease: {}", granted.status().ToString());
      return;
    }
    lease_ = *granted;
    lease_until_ = now + o_.ttl;
    next_renew_ = now + renew_every_;
    etcd_.Put(member_key_, coord::ControllerValue({o_.endpoint, o_.http, 0}), lease_).IgnoreError();
  }

  void Renew(Clock::time_point now) {
    auto left = etcd_.KeepAlive(lease_);
    Reachable(left.ok());
    if (!left.ok()) {
      next_renew_ = now + poll_;  // etcd unreachable: try again soon
      if (held_ != 0 && e_.LeaderEpoch(Clock::now()) == 0)
        spdlog::warn("election: cannot renew the lease; not leading until it is renewed");
      return;
    }
    if (*left == 0) {  // expired: whatever it held is gone
      Lose("the lease expired");
      lease_ = 0;
      return;
    }
    lease_until_ = now + std::chrono::seconds(*left);
    next_renew_ = now + renew_every_;
    if (held_ != 0) Publish(held_);
  }

  // Reads the leader key: campaigns when it is gone, adopts it when it is
  // bound to this lease, follows another leader otherwise.
  void Watch(Clock::time_point now) {
    auto kv = etcd_.Get(leader_key_);
    Reachable(kv.ok());
    if (!kv.ok()) return;
    if (!kv->has_value()) {
      if (held_ != 0) Lose("the leader key is gone");
      SetCurrent({});
      Stand(now);
      return;
    }
    const coord::EtcdKv& key = **kv;
    if (key.lease == lease_) {
      // Ours: won now, or a win whose answer was lost on the way.
      if (held_ != key.create_revision) Win(key.create_revision, now);
      return;
    }
    if (held_ != 0) Lose("another controller holds the leader key");
    auto info = coord::LeaderFromKv(key);
    last_other_seen_ = now;
    SetCurrent(info.ok() ? *info : coord::ControllerInfo{});
  }

  void Stand(Clock::time_point now) {
    auto won = etcd_.CreateIfAbsent(leader_key_, coord::ControllerValue({o_.endpoint, o_.http, 0}),
                                    lease_);
    if (won.ok() && *won) Win(**won, now);
  }

  void Win(int64_t epoch, Clock::time_point now) {
    held_ = epoch;
    const coord::ControllerInfo self{o_.endpoint, o_.http, epoch};
    (void)etcd_.PutIfCreated(leader_key_, coord::ControllerValue(self), lease_, epoch);
    const double failover = last_other_seen_ == Clock::time_point{}
                                ? 0
                                : std::chrono::duration<double>(now - last_other_seen_).count();
    {
      std::lock_guard lock(im_.mu);
      im_.view.last_failover_seconds = failover;
      im_.view.current = self;
    }
    Publish(epoch);
    spdlog::info("election: leader of '{}' at epoch {} ({:.2f} s since another leader was seen)",
                 o_.cluster, epoch, failover);
  }

  void Lose(const std::string& why) {
    if (held_ != 0) spdlog::warn("election: no longer leader of '{}' ({})", o_.cluster, why);
    held_ = 0;
    Publish(0);
    SetCurrent({});  // not this one any more; the next read says who
  }

  // What LeaderEpoch answers: `epoch` until the guard before the lease ends.
  void Publish(int64_t epoch) {
    std::lock_guard lock(im_.lease_mu);
    im_.valid_until_ns = epoch == 0 ? 0 : Ns(lease_until_ - guard_);
    im_.epoch = epoch;
  }

  void ListMembers() {
    auto members = etcd_.List(coord::MembersPrefix(o_.cluster), 256);
    if (!members.ok()) return;
    listed_as_ = held_;  // a new leadership lists its standbys at once
    std::vector<coord::ControllerInfo> infos;
    for (const auto& kv : *members) {
      if (auto info = coord::ControllerFromValue(kv.value); info.ok())
        infos.push_back(std::move(*info));
    }
    std::lock_guard lock(im_.mu);
    im_.view.members = std::move(infos);
  }

  void SetCurrent(coord::ControllerInfo info) {
    std::lock_guard lock(im_.mu);
    im_.view.current = std::move(info);
  }

  void Reachable(bool ok) {
    std::lock_guard lock(im_.mu);
    im_.view.etcd_reachable = ok;
  }

  const LeaderElection& e_;
  const ElectionOptions& o_;
  Impl& im_;
  coord::EtcdClient etcd_;
  const std::string leader_key_, member_key_;
  const milliseconds renew_every_, guard_, poll_;
  int64_t lease_ = 0, held_ = 0, listed_as_ = 0;
  Clock::time_point lease_until_{}, next_renew_{}, next_poll_{}, last_other_seen_{};
};

void LeaderElection::Run() { Campaign(*this).Run(); }

}  // namespace pikv::controller
