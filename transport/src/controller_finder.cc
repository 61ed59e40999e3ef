#include "pikv/transport/controller_finder.h"

#include <algorithm>

#include "pikv/common/guarded_thread.h"
#include "pikv/common/split.h"
#include "pikv/proto/control_wire.h"

namespace pikv {

bool DialsTcp(const std::string& spec) {
  return spec.rfind("tcp://", 0) == 0 || spec.rfind("etcd://", 0) == 0;
}

namespace {
// How often a known leader is checked against the source: a new leadership is
// seen within this, before any caller has to fail over.
constexpr auto kRecheck = std::chrono::seconds(1);
}  // namespace

Result<std::shared_ptr<ControllerFinder>> ControllerFinder::Parse(const std::string& spec) {
  if (spec.find("://") != std::string::npos && spec.rfind("tcp://", 0) != 0 &&
      spec.rfind("ipc://", 0) != 0) {
    return InvalidArgument("'" + spec +
                           "' is not a tcp:// or ipc:// endpoint (an etcd:// spec needs a program "
                           "that reads etcd: pikv, pikv-node, the Python package)");
  }
  std::shared_ptr<ControllerFinder> f(new ControllerFinder());
  f->spec_ = spec;
  for (std::string_view endpoint : SplitList(spec)) {
    if (endpoint.empty()) return InvalidArgument("empty controller in '" + spec + "'");
    f->listed_.emplace_back(endpoint);
  }
  f->current_ = f->listed_.front();
  f->next_ = 1 % f->listed_.size();
  return f;
}

ControllerFinder::~ControllerFinder() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  if (refresher_.joinable()) refresher_.join();
}

std::shared_ptr<ControllerFinder> ControllerFinder::Following(std::string spec,
                                                              std::unique_ptr<LeaderSource> source,
                                                              std::chrono::milliseconds reread) {
  std::shared_ptr<ControllerFinder> f(new ControllerFinder());
  f->spec_ = std::move(spec);
  f->source_ = std::move(source);
  f->reread_ = reread;
  f->refresher_ = EssentialThread("leader finder", [raw = f.get()] { raw->Refresh(); });
  return f;
}

void ControllerFinder::Refresh() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    const LeaderSource::Leader leader = source_->Read();
    lock.lock();
    // The source has the last word when nobody is known, or on a newer leadership.
    if (!leader.endpoint.empty() && (current_.empty() || leader.epoch > max_epoch_)) {
      current_ = leader.endpoint;
      changed_.notify_all();
    }
    max_epoch_ = std::max(max_epoch_, leader.epoch);
    const bool known = !current_.empty();
    changed_.wait_for(lock, known ? std::chrono::milliseconds(kRecheck) : reread_,
                      [&] { return stop_ || (known && current_.empty()); });
  }
}

std::string ControllerFinder::Current() {
  std::lock_guard lock(mu_);
  return current_;
}

std::string ControllerFinder::Await(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  changed_.wait_until(lock, deadline, [&] { return stop_ || !current_.empty(); });
  return current_;
}

std::string ControllerFinder::FollowNotLeader(const Header& reply) {
  NotLeader named = DecodeNotLeader(reply);
  Redirect(named.leader, named.leader_epoch);
  return std::move(named.leader);
}

void ControllerFinder::Redirect(const std::string& leader, int64_t epoch) {
  // What a controller names must look like an endpoint; anything else is
  // treated as no answer (the dialler validates it fully).
  const bool plausible = leader.size() <= 512 &&
                         (leader.rfind("tcp://", 0) == 0 || leader.rfind("ipc://", 0) == 0) &&
                         leader.find_first_of(" ,\n") == std::string::npos;
  std::unique_lock lock(mu_);
  // A standby that has not yet heard of a newer leadership names an older
  // one: as good as no answer.
  if (!plausible || (epoch != 0 && epoch < max_epoch_)) {
    const std::string asked = current_;
    lock.unlock();
    return Failed(asked);
  }
  max_epoch_ = std::max(max_epoch_, epoch);
  if (leader != current_ && listed_.size() == 1) redirected_ = true;
  current_ = leader;
}

void ControllerFinder::Failed(const std::string& endpoint) {
  std::lock_guard lock(mu_);
  if (endpoint != current_) return;  // someone moved on already
  if (source_) {
    current_.clear();
    changed_.notify_all();  // the refresher reads the source now
    return;
  }
  current_ = listed_[next_];
  next_ = (next_ + 1) % listed_.size();
}

}  // namespace pikv
