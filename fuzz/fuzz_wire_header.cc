// The wire header decoder, then the locate reply decoder over what it gives;
// a header that decodes must re-encode to something that decodes the same.
#include <cstdlib>

#include "pikv/proto/locate_reply.h"
#include "pikv/proto/message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto h = pikv::DecodeHeader({data, size});
  if (!h.ok()) return 0;
  pikv::DecodeLocateReply(*h, h->keys.size()).status().IgnoreError();
  const std::string again = pikv::EncodeHeader(*h);
  auto h2 = pikv::DecodeHeader({reinterpret_cast<const uint8_t*>(again.data()), again.size()});
  if (!h2.ok() || h2->keys != h->keys || h2->values != h->values || h2->fields != h->fields ||
      h2->reason != h->reason || h2->type != h->type || h2->request_id != h->request_id)
    abort();
  return 0;
}
