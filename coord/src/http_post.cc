#include "pikv/coord/http_post.h"

#include <curl/curl.h>
#include <unistd.h>

#include <mutex>

namespace pikv::coord {

namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Sink {
  std::string body;
  bool too_large = false;
};

size_t Write(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const size_t n = size * count;
  if (n > kMaxResponseBytes - sink->body.size()) {
    sink->too_large = true;
    return 0;  // curl stops the transfer with CURLE_WRITE_ERROR
  }
  sink->body.append(data, n);
  return n;
}

Status ErrorOf(CURLcode code, const char* detail, const std::string& url) {
  const std::string why = url + ": " + (detail[0] ? detail : curl_easy_strerror(code));
  if (code == CURLE_OPERATION_TIMEDOUT) return Timeout(why);
  return Unavailable(why);
}

}  // namespace

TlsFiles TlsFiles::InDir(const std::string& dir) {
  return {dir + "/ca.crt", dir + "/client.crt", dir + "/client.key"};
}

Status TlsFiles::Check() const {
  for (const std::string* f : {&ca, &cert, &key}) {
    if (f->empty() || ::access(f->c_str(), R_OK) != 0)
      return InvalidArgument("TLS file '" + *f + "' cannot be read");
  }
  return Status::Ok();
}

struct HttpClient::Handle {
  CURL* curl = nullptr;
  ~Handle() {
    if (curl) curl_easy_cleanup(curl);
  }
};

HttpClient::HttpClient(TlsFiles tls) : tls_(std::move(tls)), handle_(std::make_unique<Handle>()) {
  GlobalInit();
}
HttpClient::~HttpClient() = default;
HttpClient::HttpClient(HttpClient&&) noexcept = default;
HttpClient& HttpClient::operator=(HttpClient&&) noexcept = default;

Result<ClientResponse> HttpClient::Post(const std::string& url, const std::string& body,
                                        std::chrono::milliseconds timeout,
                                        const std::string& authorization) {
  if (!handle_->curl) handle_->curl = curl_easy_init();
  CURL* curl = handle_->curl;
  if (!curl) return IoError("curl: cannot make a handle");
  curl_easy_reset(curl);  // keeps the connection cache
  Sink sink;
  char detail[CURL_ERROR_SIZE] = "";
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  const std::string auth_header = "Authorization: " + authorization;
  if (!authorization.empty()) headers = curl_slist_append(headers, auth_header.c_str());
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for lookups
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(std::max<int64_t>(1, timeout.count())));
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Write);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, detail);
  if (tls_.enabled()) {
    // Only our CA: the system's CA directory (libcurl's built-in default,
    // back after every reset) must not vouch for an etcd.
    curl_easy_setopt(curl, CURLOPT_CAINFO, tls_.ca.c_str());
    curl_easy_setopt(curl, CURLOPT_CAPATH, nullptr);
    if (!tls_.cert.empty()) curl_easy_setopt(curl, CURLOPT_SSLCERT, tls_.cert.c_str());
    if (!tls_.key.empty()) curl_easy_setopt(curl, CURLOPT_SSLKEY, tls_.key.c_str());
  }
  const CURLcode code = curl_easy_perform(curl);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);  // `detail` is about to go
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, nullptr);
  curl_slist_free_all(headers);
  if (sink.too_large)
    return TooLarge(url + ": response over " + std::to_string(kMaxResponseBytes) + " bytes");
  if (code != CURLE_OK) return ErrorOf(code, detail, url);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  return ClientResponse{static_cast<int>(status), std::move(sink.body)};
}

}  // namespace pikv::coord
