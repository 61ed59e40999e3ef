// EtcdClient: the few etcd v3 calls pikv's leadership needs, over etcd's
// JSON gateway (POST /v3/..., keys and values base64, int64 as strings), so
// no gRPC stack is linked; over https with a client certificate when the
// access names TLS files (docs/security.md). Each call tries the endpoints
// in turn, starting with the last one that answered, all within one
// deadline (a member that hung is asked last by the next call);
// an answer that is not the JSON etcd sends is an error, never a throw.
// Not thread-safe: one per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pikv/common/status.h"
#include "pikv/coord/http_post.h"

namespace pikv::coord {

struct EtcdKv {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t lease = 0;
};

// How to reach etcd: its members, and TLS (mutual) or not.
struct EtcdAccess {
  std::vector<std::string> endpoints;  // host:port each; an IPv6 host in brackets
  TlsFiles tls;                        // empty: plaintext http

  bool empty() const { return endpoints.empty(); }
  // "h1:2379,https://[::1]:2379" and the directory of `pikv etcd-certs`'
  // files (empty: none). An error when the list is empty, an entry is not
  // host:port, https is asked for without TLS files or http with them, or
  // a TLS file cannot be read.
  static Result<EtcdAccess> Parse(std::string_view list, const std::string& tls_dir = {});
  std::string Url(size_t member, const std::string& path) const;
};

class EtcdClient {
 public:
  EtcdClient(EtcdAccess access, std::chrono::milliseconds timeout);
  // Plaintext, for tests and tools: host:port each.
  EtcdClient(std::vector<std::string> endpoints, std::chrono::milliseconds timeout)
      : EtcdClient(EtcdAccess{std::move(endpoints), {}}, timeout) {}

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

  const std::vector<std::string>& endpoints() const { return access_.endpoints; }
  // The next call starts at the member after the one that answered last.
  void StartAtNextMember() { preferred_ = (preferred_ + 1) % access_.endpoints.size(); }

 private:
  // The response body of POST `path` with a JSON body, from the first
  // endpoint that answers 200.
  Result<std::string> Call(const std::string& path, const std::string& body);

  EtcdAccess access_;
  std::chrono::milliseconds timeout_;
  HttpClient http_;
  size_t preferred_ = 0;
};

}  // namespace pikv::coord
