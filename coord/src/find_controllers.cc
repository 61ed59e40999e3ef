#include "pikv/coord/find_controllers.h"

#include "pikv/coord/etcd_client.h"
#include "pikv/coord/leader_key.h"

namespace pikv::coord {

namespace {

constexpr auto kEtcdTimeout = std::chrono::milliseconds(250);

// The leader key of one cluster, read on the finder's thread.
class EtcdLeaderSource final : public LeaderSource {
 public:
  EtcdLeaderSource(EtcdAccess access, std::string cluster)
      : etcd_(std::move(access), kEtcdTimeout), cluster_(std::move(cluster)) {}

  Leader Read() override {
    // Each read starts at the next member: one cut off from etcd's quorum
    // (still answering from its stale copy) is not asked first forever. A
    // hint is enough (a stale one is corrected by kNotLeader): a
    // serializable read, answered while etcd elects its own leader.
    etcd_.StartAtNextMember();
    auto kv = etcd_.Get(LeaderKey(cluster_), true);
    if (!kv.ok() || !kv->has_value()) return {};
    auto info = LeaderFromKv(**kv);
    if (!info.ok()) return {};
    return {info->endpoint, info->epoch};
  }

 private:
  EtcdClient etcd_;  // one, so its connections are kept
  const std::string cluster_;
};

}  // namespace

Result<std::shared_ptr<ControllerFinder>> FindControllers(const std::string& spec) {
  if (spec.rfind("etcd://", 0) != 0) return ControllerFinder::Parse(spec);
  std::string rest = spec.substr(7), tls_dir;
  if (const size_t query = rest.find('?'); query != std::string::npos) {
    if (rest.compare(query + 1, 4, "tls=") != 0 || query + 5 == rest.size())
      return InvalidArgument("etcd spec: the only option is ?tls=DIR, in '" + spec + "'");
    tls_dir = rest.substr(query + 5);
    rest.resize(query);
  }
  const size_t slash = rest.find('/');
  const std::string cluster = slash == std::string::npos ? "pikv" : rest.substr(slash + 1);
  if (slash != std::string::npos) rest.resize(slash);
  if (Status s = CheckClusterName(cluster); !s.ok()) return s;
  auto access = EtcdAccess::Parse(rest, tls_dir);
  if (!access.ok()) return access.status();
  return ControllerFinder::Following(
      spec, std::make_unique<EtcdLeaderSource>(std::move(*access), cluster));
}

}  // namespace pikv::coord
