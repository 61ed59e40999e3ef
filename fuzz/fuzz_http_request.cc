// HTTP request heads and queries, as the metrics/health server parses them;
// and the endpoint and name checks that guard registrations and pulls.
#include "pikv/http/http_server.h"
#include "pikv/proto/endpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = pikv::http::ParseRequestHead(text);
  if (r.ok()) (void)r->Param("key");
  auto e = pikv::ParseEndpoint(text);
  if (e.ok() && pikv::ParseEndpoint(e->ToString())->ToString() != e->ToString()) abort();
  (void)pikv::IsValidUtf8(text);
  pikv::CheckNodeId(text).IgnoreError();
  pikv::CheckHostName(text).IgnoreError();
  return 0;
}
