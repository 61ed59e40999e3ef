// pikv's CUDA runtime (linked statically, beside the engine's): whether it
// runs here, and host memory a CUDA device copies from directly (page-locked by the
// driver), for the fused remap's staging: registering the local node's
// arena once lets leased objects go to the device without a bounce through
// a pinned buffer. Built with the CUDA backend (PIKV_HAVE_CUDA).
#pragma once

#include <cstddef>

#include "pikv/common/status.h"

namespace pikv::device {

// Registers [data, data + size) for every CUDA context, read-only where the
// mapping is (the device only reads it). Released by CudaHostUnregister.
Status CudaHostRegister(const void* data, size_t size, bool read_only);
// Devices pikv's own CUDA runtime sees: 0 where it cannot run (no driver, or
// one older than the runtime pikv was built with).
int CudaDeviceCount();
Status CudaHostUnregister(const void* data);

}  // namespace pikv::device
