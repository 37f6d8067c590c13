// Device-side helpers shared by the CUDA backend's kernels: the block size and
// grid of element-wise kernels and the indices of their grid-stride loops.
//
// Internal to the plugin; included only by .cu files (nvcc).
#ifndef ASGD_MODEL_CUDA_CUDA_DEVICE_CUH_
#define ASGD_MODEL_CUDA_CUDA_DEVICE_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace asgd {
namespace cuda_kernels {

// Threads per block of the element-wise kernels.
inline constexpr int kElementwiseBlock = 256;

// Blocks for an element-wise kernel over `count` elements: one element per
// thread, capped at 65536 blocks (the grid-stride loops cover whatever a
// capped grid leaves over); at least 1.
inline int ElementwiseGrid(int64_t count) {
  const int64_t blocks = (count + kElementwiseBlock - 1) / kElementwiseBlock;
  return static_cast<int>(blocks < 1 ? 1 : blocks < 65536 ? blocks : 65536);
}

// The first index and the stride of a grid-stride loop:
//   for (int64_t e = GlobalThread(); e < count; e += GridThreads()) ...
__device__ __forceinline__ int64_t GlobalThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t GridThreads() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

}  // namespace cuda_kernels
}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_CUDA_DEVICE_CUH_
