// The reduction kernels of the CUDA ModelBackend. Kept deliberately plain:
// row and channel reductions use one 256-thread block per row or channel with
// a shared-memory tree, column sums use one 32x32 block per 32 columns. Every
// reduction has a fixed order, so results are deterministic.
#include <cuda_runtime.h>

#include <climits>
#include <cmath>

#include "model/cuda/cuda_kernels.h"

namespace asgd {
namespace cuda_kernels {
namespace {

constexpr int kBlock = 256;  // threads per block; a power of two (reductions)
constexpr int kTile = 32;    // ColumnSumsKernel: block of kTile x kTile
constexpr int kTileThreads = kTile * kTile;

// Argmax of row[0, cols) over the kBlock threads of the block: the largest
// value, ties to the smallest index (like std::max_element). Every thread of
// the block must call it; every thread gets the result. `s_val` and `s_idx`
// are shared arrays of kBlock entries, free again on return.
__device__ void BlockArgmax(const float* row, int cols, float* s_val,
                            int* s_idx, float* max_value, int* max_index) {
  const int t = threadIdx.x;
  // Each thread scans k = t, t + kBlock, ... in increasing order and keeps
  // the first maximum; INT_MAX marks "no element seen" (threads t >= cols).
  float best = -INFINITY;
  int best_index = INT_MAX;
  for (int k = t; k < cols; k += kBlock) {
    const float v = row[k];
    if (best_index == INT_MAX || v > best) {
      best = v;
      best_index = k;
    }
  }
  s_val[t] = best;
  s_idx[t] = best_index;
  __syncthreads();
  for (int stride = kBlock / 2; stride > 0; stride >>= 1) {
    if (t < stride) {
      const float v = s_val[t + stride];
      const int i = s_idx[t + stride];
      if (i != INT_MAX && (s_idx[t] == INT_MAX || v > s_val[t] ||
                           (v == s_val[t] && i < s_idx[t]))) {
        s_val[t] = v;
        s_idx[t] = i;
      }
    }
    __syncthreads();
  }
  *max_value = s_val[0];
  *max_index = s_idx[0];
  __syncthreads();  // everyone has read s_val[0] before the arrays are reused
}

// Sum of `value` over the kBlock threads of the block; every thread must
// call it and gets the result. `s_sum` (kBlock entries) is free on return.
__device__ float BlockSum(float value, float* s_sum) {
  const int t = threadIdx.x;
  s_sum[t] = value;
  __syncthreads();
  for (int stride = kBlock / 2; stride > 0; stride >>= 1) {
    if (t < stride) s_sum[t] += s_sum[t + stride];
    __syncthreads();
  }
  const float total = s_sum[0];
  __syncthreads();
  return total;
}

// One block of kBlock threads per row.
__global__ void __launch_bounds__(kBlock)
    SoftmaxCrossEntropyKernel(const float* logits, const int32_t* labels,
                              int rows, int cols, float scale, float* dlogits,
                              float* row_loss, int32_t* row_correct) {
  __shared__ float s_val[kBlock];
  __shared__ int s_idx[kBlock];
  const int row = blockIdx.x;
  const int t = threadIdx.x;
  const float* z = logits + static_cast<int64_t>(row) * cols;
  float* dz = dlogits + static_cast<int64_t>(row) * cols;
  const int label = labels[row];
  if (label < 0) {  // an unlabelled row: no loss, no gradient
    for (int k = t; k < cols; k += kBlock) dz[k] = 0.0f;
    if (t == 0) {
      row_loss[row] = 0.0f;
      row_correct[row] = 0;
    }
    return;
  }

  float max_value;
  int max_index;
  BlockArgmax(z, cols, s_val, s_idx, &max_value, &max_index);

  float partial = 0.0f;
  for (int k = t; k < cols; k += kBlock) partial += expf(z[k] - max_value);
  const float sum = BlockSum(partial, s_val);

  for (int k = t; k < cols; k += kBlock) {
    const float p = expf(z[k] - max_value) / sum;
    dz[k] = (p - (k == label ? 1.0f : 0.0f)) * scale;
  }
  if (t == 0) {
    const float p = expf(z[label] - max_value) / sum;
    row_loss[row] = -logf(fmaxf(p, 1e-30f));
    row_correct[row] = max_index == label ? 1 : 0;
  }
}

// One block of kBlock threads per row.
__global__ void __launch_bounds__(kBlock)
    RowArgmaxKernel(const float* logits, int cols, int32_t* out) {
  __shared__ float s_val[kBlock];
  __shared__ int s_idx[kBlock];
  const int row = blockIdx.x;
  float max_value;
  int max_index;
  BlockArgmax(logits + static_cast<int64_t>(row) * cols, cols, s_val, s_idx,
              &max_value, &max_index);
  if (threadIdx.x == 0) out[row] = max_index;
}

// Block (kTile, kTile) per kTile columns: thread (x, y) sums rows y,
// y + kTile, ... of column blockIdx.x * kTile + x; then row y == 0 adds the
// kTile partial sums of its column in order.
__global__ void __launch_bounds__(kTileThreads)
    ColumnSumsKernel(const float* m, int rows, int cols, float* sums) {
  __shared__ float partial[kTile][kTile + 1];
  const int x = threadIdx.x, y = threadIdx.y;
  const int col = blockIdx.x * kTile + x;
  float s = 0.0f;
  if (col < cols) {
    for (int r = y; r < rows; r += kTile) {
      s += m[static_cast<int64_t>(r) * cols + col];
    }
  }
  partial[y][x] = s;
  __syncthreads();
  if (y == 0 && col < cols) {
    float total = 0.0f;
    for (int i = 0; i < kTile; ++i) total += partial[i][x];
    sums[col] = total;
  }
}

// One block of kBlock threads per channel k = blockIdx.x: thread t sums the
// elements e = t, t + kBlock, ... of the rows * group elements of channel k
// (row e / group, position e % group), then the block adds the partial sums
// in a fixed tree.
__global__ void __launch_bounds__(kBlock)
    ChannelSumsKernel(const float* m, int rows, int groups, int group,
                      float* sums) {
  __shared__ float s_sum[kBlock];
  const int k = blockIdx.x;
  if (k >= groups) return;  // the whole block leaves together
  const int64_t per_channel = static_cast<int64_t>(rows) * group;
  const int64_t row_stride = static_cast<int64_t>(groups) * group;
  float s = 0.0f;
  for (int64_t e = threadIdx.x; e < per_channel; e += kBlock) {
    const int64_t i = e / group;
    const int64_t q = e % group;
    s += m[i * row_stride + static_cast<int64_t>(k) * group + q];
  }
  const float total = BlockSum(s, s_sum);
  if (threadIdx.x == 0) sums[k] = total;
}

}  // namespace

cudaError_t LaunchSoftmaxCrossEntropy(const float* logits,
                                      const int32_t* labels, int rows, int cols,
                                      float scale, float* dlogits,
                                      float* row_loss, int32_t* row_correct,
                                      cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  SoftmaxCrossEntropyKernel<<<rows, kBlock, 0, stream>>>(
      logits, labels, rows, cols, scale, dlogits, row_loss, row_correct);
  return cudaGetLastError();
}

cudaError_t LaunchRowArgmax(const float* logits, int rows, int cols,
                            int32_t* out, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  RowArgmaxKernel<<<rows, kBlock, 0, stream>>>(logits, cols, out);
  return cudaGetLastError();
}

cudaError_t LaunchColumnSums(const float* m, int rows, int cols, float* sums,
                             cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const dim3 block(kTile, kTile);
  const int blocks = (cols + kTile - 1) / kTile;
  ColumnSumsKernel<<<blocks, block, 0, stream>>>(m, rows, cols, sums);
  return cudaGetLastError();
}

cudaError_t LaunchChannelSums(const float* m, int rows, int groups, int group,
                              float* sums, cudaStream_t stream) {
  if (rows <= 0 || groups <= 0 || group <= 0) return cudaSuccess;
  ChannelSumsKernel<<<groups, kBlock, 0, stream>>>(m, rows, groups, group,
                                                   sums);
  return cudaGetLastError();
}

}  // namespace cuda_kernels
}  // namespace asgd
