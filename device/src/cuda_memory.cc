#include "pikv/device/cuda_memory.h"

#include <cuda_runtime.h>

#include <string>

namespace pikv::device {

Status CudaHostRegister(const void* data, size_t size, bool read_only) {
  unsigned flags = cudaHostRegisterPortable | (read_only ? cudaHostRegisterReadOnly : 0);
  cudaError_t err = cudaHostRegister(const_cast<void*>(data), size, flags);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // handled here: not left for the next launch check
    return IoError(std::string("cudaHostRegister: ") + cudaGetErrorString(err));
  }
  return Status::Ok();
}

int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

Status CudaHostUnregister(const void* data) {
  cudaError_t err = cudaHostUnregister(const_cast<void*>(data));
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return IoError(std::string("cudaHostUnregister: ") + cudaGetErrorString(err));
  }
  return Status::Ok();
}

}  // namespace pikv::device
