// EtcdClient: the few etcd v3 calls pikv's leadership needs, over etcd's
// JSON gateway (POST /v3/..., keys and values base64, int64 as strings), so
// no gRPC stack is linked. Each call tries the endpoints in turn, starting
// with the last one that answered, within one deadline per endpoint; an
// answer that is not the JSON etcd sends is an error, never a throw.
// Not thread-safe: one per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pikv/common/status.h"

namespace pikv::coord {

struct EtcdKv {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t lease = 0;
};

class EtcdClient {
 public:
  // endpoints: host:port each.
  EtcdClient(std::vector<std::string> endpoints, std::chrono::milliseconds timeout);

  // "h1:2379,http://h2:2379" -> {"h1:2379", "h2:2379"}; an error when empty
  // or any entry is not host:port.
  static Result<std::vector<std::string>> ParseEndpoints(std::string_view list);

  Result<int64_t> GrantLease(int64_t ttl_seconds);
  // The lease's TTL after renewing it; 0 when etcd no longer knows it (expired).
  Result<int64_t> KeepAlive(int64_t lease);
  Status Revoke(int64_t lease);
  // Puts key = value bound to `lease` if the key does not exist; its create
  // revision when it was put, nullopt when the key existed.
  Result<std::optional<int64_t>> CreateIfAbsent(const std::string& key, const std::string& value,
                                                int64_t lease);
  // Puts key = value bound to `lease` if the key's create revision is `revision`.
  Result<bool> PutIfCreated(const std::string& key, const std::string& value, int64_t lease,
                            int64_t revision);
  Status Put(const std::string& key, const std::string& value, int64_t lease);
  // `serializable`: answered by the member asked, without a round through
  // etcd's leader (possibly stale, but served while etcd elects a leader).
  Result<std::optional<EtcdKv>> Get(const std::string& key, bool serializable = false);
  // Every key under `prefix`, at most `limit`.
  Result<std::vector<EtcdKv>> List(const std::string& prefix, int64_t limit = 1000);

  const std::vector<std::string>& endpoints() const { return endpoints_; }

 private:
  // The response body of POST `path` with a JSON body, from the first
  // endpoint that answers 200.
  Result<std::string> Call(const std::string& path, const std::string& body);

  std::vector<std::string> endpoints_;
  std::chrono::milliseconds timeout_;
  size_t preferred_ = 0;
};

}  // namespace pikv::coord
