#include "pikv/coord/controller_finder.h"

#include <algorithm>

#include "pikv/coord/etcd_client.h"
#include "pikv/coord/leader_key.h"

namespace pikv::coord {

bool DialsTcp(const std::string& spec) {
  return spec.rfind("tcp://", 0) == 0 || spec.rfind("etcd://", 0) == 0;
}

Result<std::shared_ptr<ControllerFinder>> ControllerFinder::Parse(
    const std::string& spec, std::chrono::milliseconds reread) {
  std::shared_ptr<ControllerFinder> f(new ControllerFinder());
  f->spec_ = spec;
  f->reread_ = reread;
  if (spec.rfind("etcd://", 0) == 0) {
    std::string rest = spec.substr(7);
    const size_t slash = rest.find('/');
    f->cluster_ = slash == std::string::npos ? "pikv" : rest.substr(slash + 1);
    if (slash != std::string::npos) rest.resize(slash);
    if (Status s = CheckClusterName(f->cluster_); !s.ok()) return s;
    auto endpoints = EtcdClient::ParseEndpoints(rest);
    if (!endpoints.ok()) return endpoints.status();
    f->etcd_ = std::move(*endpoints);
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

std::string ControllerFinder::ReadEtcd() {
  std::vector<std::string> members;
  {
    std::lock_guard lock(mu_);
    if (!current_.empty()) return current_;
    const auto now = std::chrono::steady_clock::now();
    if (now - read_at_ < reread_) return {};
    read_at_ = now;
    // Each read starts at the next member: one cut off from etcd's quorum
    // (still answering from its stale copy) is not asked first forever.
    members = etcd_;
    std::rotate(members.begin(), members.begin() + first_member_ % members.size(), members.end());
    first_member_++;
  }
  // A hint is enough (a stale one is corrected by kNotLeader): a
  // serializable read, answered while etcd elects its own leader.
  EtcdClient etcd(members, std::chrono::milliseconds(250));
  auto kv = etcd.Get(LeaderKey(cluster_), /*serializable=*/true);
  coord::ControllerInfo leader;
  if (kv.ok() && kv->has_value()) {
    if (auto info = LeaderFromKv(**kv); info.ok()) leader = *info;
  }
  std::lock_guard lock(mu_);
  if (current_.empty()) current_ = leader.endpoint;  // etcd has the last word on epochs
  max_epoch_ = std::max(max_epoch_, leader.epoch);
  return current_;
}

std::string ControllerFinder::Current() {
  if (!etcd_.empty()) return ReadEtcd();
  std::lock_guard lock(mu_);
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
    return;
  }
  current_ = listed_[next_];
  next_ = (next_ + 1) % listed_.size();
}

}  // namespace pikv::coord
