#include "pikv/coord/controller_finder.h"

#include <algorithm>

#include "pikv/common/guarded_thread.h"
#include "pikv/coord/etcd_client.h"
#include "pikv/coord/leader_key.h"

namespace pikv::coord {

bool DialsTcp(const std::string& spec) {
  return spec.rfind("tcp://", 0) == 0 || spec.rfind("etcd://", 0) == 0;
}

namespace {
// How often a known leader is checked against etcd: a new leadership is
// seen within this, before any caller has to fail over.
constexpr auto kRecheck = std::chrono::seconds(1);
constexpr auto kEtcdTimeout = std::chrono::milliseconds(250);
}  // namespace

Result<std::shared_ptr<ControllerFinder>> ControllerFinder::Parse(
    const std::string& spec, std::chrono::milliseconds reread) {
  std::shared_ptr<ControllerFinder> f(new ControllerFinder());
  f->spec_ = spec;
  f->reread_ = reread;
  if (spec.rfind("etcd://", 0) == 0) {
    std::string rest = spec.substr(7), tls_dir;
    if (const size_t query = rest.find('?'); query != std::string::npos) {
      if (rest.compare(query + 1, 4, "tls=") != 0 || query + 5 == rest.size())
        return InvalidArgument("etcd spec: the only option is ?tls=DIR, in '" + spec + "'");
      tls_dir = rest.substr(query + 5);
      rest.resize(query);
    }
    const size_t slash = rest.find('/');
    f->cluster_ = slash == std::string::npos ? "pikv" : rest.substr(slash + 1);
    if (slash != std::string::npos) rest.resize(slash);
    if (Status s = CheckClusterName(f->cluster_); !s.ok()) return s;
    auto access = EtcdAccess::Parse(rest, tls_dir);
    if (!access.ok()) return access.status();
    f->etcd_ = std::move(*access);
    f->refresher_ = EssentialThread("leader finder", [raw = f.get()] { raw->Refresh(); });
    return f;
  }
  for (size_t pos = 0; pos <= spec.size();) {
    const size_t end = std::min(spec.find(',', pos), spec.size());
    if (end == pos) return InvalidArgument("empty controller in '" + spec + "'");
    f->listed_.push_back(spec.substr(pos, end - pos));
    pos = end + 1;
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

void ControllerFinder::Refresh() {
  EtcdClient etcd(etcd_, kEtcdTimeout);  // one, so its connections are kept
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    // Each read starts at the next member: one cut off from etcd's quorum
    // (still answering from its stale copy) is not asked first forever. A
    // hint is enough (a stale one is corrected by kNotLeader): a
    // serializable read, answered while etcd elects its own leader.
    etcd.StartAtNextMember();
    ControllerInfo leader;
    auto kv = etcd.Get(LeaderKey(cluster_), true);
    if (kv.ok() && kv->has_value()) {
      if (auto info = LeaderFromKv(**kv); info.ok()) leader = *info;
    }
    lock.lock();
    // etcd has the last word when nobody is known, or on a newer leadership.
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
  if (!etcd_.empty()) {
    current_.clear();
    changed_.notify_all();  // the refresher reads etcd now
    return;
  }
  current_ = listed_[next_];
  next_ = (next_ + 1) % listed_.size();
}

}  // namespace pikv::coord
