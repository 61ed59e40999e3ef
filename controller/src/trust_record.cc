#include "pikv/controller/trust_record.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "pikv/coord/leader_key.h"
#include "pikv/proto/owner.h"

namespace pikv::controller {

namespace {

constexpr size_t kMaxFileBytes = 1 << 20;

// Writes all of `bytes` to `path` and syncs it.
Status WriteSynced(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return IoError("open " + path + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      return IoError("write " + path + ": " + why);
    }
    done += static_cast<size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  const std::string why = std::strerror(errno);
  ::close(fd);
  return synced ? Status::Ok() : IoError("fsync " + path + ": " + why);
}

}  // namespace

EtcdTrustRecord::EtcdTrustRecord(coord::EtcdClient etcd, std::string cluster)
    : etcd_(std::move(etcd)), cluster_(std::move(cluster)) {}

Result<TrustRecord::Loaded> EtcdTrustRecord::Load() {
  Loaded out;
  const std::string revoked = coord::RevokedPrefix(cluster_);
  auto names = etcd_.List(revoked, kMaxEntries);
  if (!names.ok()) return names.status();
  for (const coord::EtcdKv& kv : *names) {
    const std::string name = kv.key.substr(revoked.size());
    if (!IsIdentityName(name)) {
      spdlog::warn("controller: etcd key {} names no engine: skipped", kv.key);
      continue;
    }
    out.revoked.push_back(name);
  }
  const std::string confirmed = coord::ConfirmedPrefix(cluster_);
  auto counts = etcd_.List(confirmed, kMaxEntries);
  if (!counts.ok()) return counts.status();
  for (const coord::EtcdKv& kv : *counts) {
    const std::string writer = kv.key.substr(confirmed.size());
    uint64_t n = 0;
    const char* end = kv.value.data() + kv.value.size();
    if (!IsIdentityName(writer) || std::from_chars(kv.value.data(), end, n).ptr != end) {
      spdlog::warn("controller: etcd key {} is not a writer's count: skipped", kv.key);
      continue;
    }
    out.confirmed[writer] = n;
  }
  return out;
}

Status EtcdTrustRecord::Revoke(const std::string& engine) {
  if (!IsIdentityName(engine)) return InvalidArgument("revoke names an engine");
  return etcd_.Put(coord::RevokedPrefix(cluster_) + engine, "1", 0);
}

Status EtcdTrustRecord::Confirmed(const std::string& writer, uint64_t count) {
  if (!IsIdentityName(writer)) return InvalidArgument("not a writer's name: " + writer);
  return etcd_.Put(coord::ConfirmedPrefix(cluster_) + writer, std::to_string(count), 0);
}

Result<TrustRecord::Loaded> FileTrustRecord::Load() {
  using nlohmann::json;
  std::error_code ec;
  const bool exists = std::filesystem::exists(path_, ec);
  if (ec) return IoError("cannot look for " + path_ + ": " + ec.message());
  if (!exists) {  // the first start
    current_ = {};
    return current_;
  }
  std::ifstream in(path_, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || text.str().size() > kMaxFileBytes)
    return IoError("cannot read " + path_ + " (or it is over 1 MiB)");
  const json doc = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return Corruption(path_ + " is not a JSON object");
  Loaded out;
  if (auto r = doc.find("revoked"); r != doc.end() && r->is_array()) {
    for (const json& e : *r) {
      if (e.is_string() && IsIdentityName(e.get<std::string>()))
        out.revoked.push_back(e.get<std::string>());
      else
        spdlog::warn("controller: {}: a revoked entry that names no engine: skipped", path_);
    }
  }
  if (auto c = doc.find("confirmed"); c != doc.end() && c->is_object()) {
    for (const auto& [writer, n] : c->items()) {
      if (IsIdentityName(writer) && n.is_number_unsigned())
        out.confirmed[writer] = n.get<uint64_t>();
      else
        spdlog::warn("controller: {}: a confirmed entry that is not a writer's count: skipped",
                     path_);
    }
  }
  current_ = out;
  return out;
}

Status FileTrustRecord::Write(const Loaded& record) {
  nlohmann::json doc = {{"revoked", record.revoked}, {"confirmed", record.confirmed}};
  const std::string tmp = path_ + ".tmp";
  if (Status s = WriteSynced(tmp, doc.dump(1) + "\n"); !s.ok()) return s;
  if (::rename(tmp.c_str(), path_.c_str()) != 0)
    return IoError("rename " + tmp + ": " + std::strerror(errno));
  current_ = record;  // in place now, whether or not the rename is durable yet
  // The rename itself made durable: sync the directory.
  const std::string dir = std::filesystem::path(path_).parent_path().string();
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const bool synced = fd >= 0 && ::fsync(fd) == 0;
  const std::string why = std::strerror(errno);
  if (fd >= 0) ::close(fd);
  return synced ? Status::Ok() : IoError("fsync the directory of " + path_ + ": " + why);
}

Status FileTrustRecord::Revoke(const std::string& engine) {
  if (!IsIdentityName(engine)) return InvalidArgument("revoke names an engine");
  if (std::find(current_.revoked.begin(), current_.revoked.end(), engine) != current_.revoked.end())
    return Status::Ok();
  Loaded next = current_;
  next.revoked.push_back(engine);
  return Write(next);
}

Status FileTrustRecord::Confirmed(const std::string& writer, uint64_t count) {
  if (!IsIdentityName(writer)) return InvalidArgument("not a writer's name: " + writer);
  Loaded next = current_;
  next.confirmed[writer] = count;
  return Write(next);
}

}  // namespace pikv::controller
