#pragma once

#include <cstddef>

namespace pikv {

// Copies n bytes from src to dst (not overlapping), storing around the
// caches where the CPU can (x86-64's non-temporal stores; a plain memcpy
// elsewhere). For copies far larger than the caches whose destination this
// core will not read again: a plain store first reads each destination line
// in, so many small copies move half as many bytes again as one large
// memcpy (which glibc already streams past its own size threshold). The
// bytes are ordered before anything this thread stores after the call (on
// x86-64 it ends with a store fence; plain stores elsewhere need none), so
// they may be published to another process. Each call fences: for pieces
// of kilobytes or more, not head vectors.
void StreamCopy(void* dst, const void* src, size_t n);

}  // namespace pikv
