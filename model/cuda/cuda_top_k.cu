// The launches of the top-k encoding (cuda_resident.h LaunchTopKEncode):
// each step of top_k_impl.h as a kernel, in its order on one stream.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "model/cuda/cuda_device.cuh"
#include "model/cuda/cuda_resident.h"
#include "model/cuda/top_k_impl.h"

namespace asgd {
namespace cuda_kernels {
namespace {

using cuda_ops::kTopKMaxBins;
using cuda_ops::TopKChunkJob;
using cuda_ops::TopKChunkState;

constexpr int kMaxGridY = 65535;
constexpr int kChunkThreads = 128;  // the once-per-chunk kernels

// Grid (x, chunk - first): one round's histogram of every chunk, through a
// block-local histogram in shared memory (hot bins contend there, not in
// global memory). Round 0 also computes a = sum * scale + residual.
__global__ void TopKHistogramKernel(const TopKChunkJob* jobs, int first,
                                    int round, const TopKChunkState* state,
                                    const float* sum, float scale,
                                    const float* residual, float* a,
                                    uint32_t* hist, int* flag) {
  __shared__ uint32_t local[kTopKMaxBins];
  const int c = first + static_cast<int>(blockIdx.y);
  const TopKChunkJob job = jobs[c];
  const uint32_t prefix = round == 0 ? 0u : state[c].prefix;
  const int bins = 1 << cuda_ops::TopKRoundBits(round);
  for (int b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0u;
  __syncthreads();
  int bad = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < job.count; i += stride) {
    const int64_t e = job.flat_begin + i;
    const uint32_t key =
        round == 0 ? cuda_ops::TopKAverage(sum, scale, residual, e, a, &bad)
                   : cuda_ops::TopKKeyOf(a[e]);
    const int bin = cuda_ops::TopKBin(key, round, prefix);
    if (bin >= 0) atomicAdd(&local[bin], 1u);
  }
  if (bad != 0) atomicOr(flag, bad);
  __syncthreads();
  uint32_t* out = hist + static_cast<int64_t>(c) * kTopKMaxBins;
  for (int b = threadIdx.x; b < bins; b += blockDim.x) {
    if (local[b] != 0u) atomicAdd(&out[b], local[b]);
  }
}

// One thread per chunk.
__global__ void TopKSelectKernel(const TopKChunkJob* jobs, int num_chunks,
                                 int round, const uint32_t* hist,
                                 TopKChunkState* state, int* flag) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= num_chunks) return;
  int bad = 0;
  cuda_ops::TopKSelect(hist + static_cast<int64_t>(c) * kTopKMaxBins, round,
                       jobs[c].k, &state[c], &bad);
  if (bad != 0) atomicOr(flag, bad);
}

// Grid (x, chunk - first): one thread per tile.
__global__ void TopKTileCountKernel(const TopKChunkJob* jobs, int first,
                                    const TopKChunkState* state, const float* a,
                                    int64_t tile_size, int64_t tiles,
                                    int64_t* greater, int64_t* equal) {
  const int c = first + static_cast<int>(blockIdx.y);
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= tiles) return;
  const int64_t at = static_cast<int64_t>(c) * tiles + t;
  cuda_ops::TopKTileCount(a, jobs[c], state[c], t, tile_size, &greater[at],
                          &equal[at]);
}

// One thread per chunk.
__global__ void TopKTileOffsetsKernel(const TopKChunkJob* jobs, int num_chunks,
                                      const TopKChunkState* state,
                                      int64_t tiles, int64_t* greater,
                                      int64_t* equal, int* flag) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= num_chunks) return;
  int bad = 0;
  const int64_t at = static_cast<int64_t>(c) * tiles;
  cuda_ops::TopKTileOffsets(jobs[c], state[c], tiles, greater + at, equal + at,
                            &bad);
  if (bad != 0) atomicOr(flag, bad);
}

// Grid (x, chunk - first): one thread per tile; nothing once flagged.
__global__ void TopKTileEmitKernel(const TopKChunkJob* jobs, int first,
                                   const TopKChunkState* state, const float* a,
                                   int64_t tile_size, int64_t tiles,
                                   const int64_t* offset,
                                   const int64_t* equal_before, const int* flag,
                                   float* residual, uint32_t* indices,
                                   float* values) {
  if (*flag != 0) return;
  const int c = first + static_cast<int>(blockIdx.y);
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= tiles) return;
  const int64_t at = static_cast<int64_t>(c) * tiles + t;
  cuda_ops::TopKTileEmit(a, jobs[c], state[c], t, tile_size, offset[at],
                         equal_before[at], residual, indices, values);
}

unsigned Blocks(int64_t threads, int64_t per_block, int64_t cap) {
  const int64_t b = (threads + per_block - 1) / per_block;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(b, cap)));
}

}  // namespace

cudaError_t LaunchTopKEncode(const TopKTables& t, const float* sum, float scale,
                             float* residual, float* a, int* flag,
                             cudaStream_t stream) {
  if (t.num_chunks == 0) return cudaSuccess;
  cudaError_t error = cudaSuccess;
  const unsigned chunk_blocks = Blocks(t.num_chunks, kChunkThreads, 1 << 30);
  // Each histogram thread takes at least 16 elements, so that the shared
  // histogram's clearing and flushing stay small beside the elements.
  const unsigned hist_x = Blocks(t.max_count, kElementwiseBlock * 16, 1024);
  const unsigned tile_x = Blocks(t.tiles, kElementwiseBlock, 1 << 30);
  for (int round = 0; round < cuda_ops::kTopKRounds; ++round) {
    error = cudaMemsetAsync(
        t.hist, 0, sizeof(uint32_t) * kTopKMaxBins * t.num_chunks, stream);
    if (error != cudaSuccess) return error;
    for (int first = 0; first < t.num_chunks; first += kMaxGridY) {
      const dim3 grid(hist_x, std::min(kMaxGridY, t.num_chunks - first));
      TopKHistogramKernel<<<grid, kElementwiseBlock, 0, stream>>>(
          t.jobs, first, round, t.state, sum, scale, residual, a, t.hist, flag);
      if ((error = cudaGetLastError()) != cudaSuccess) return error;
    }
    TopKSelectKernel<<<chunk_blocks, kChunkThreads, 0, stream>>>(
        t.jobs, t.num_chunks, round, t.hist, t.state, flag);
    if ((error = cudaGetLastError()) != cudaSuccess) return error;
  }
  for (int first = 0; first < t.num_chunks; first += kMaxGridY) {
    const dim3 grid(tile_x, std::min(kMaxGridY, t.num_chunks - first));
    TopKTileCountKernel<<<grid, kElementwiseBlock, 0, stream>>>(
        t.jobs, first, t.state, a, t.tile_size, t.tiles, t.greater, t.equal);
    if ((error = cudaGetLastError()) != cudaSuccess) return error;
  }
  TopKTileOffsetsKernel<<<chunk_blocks, kChunkThreads, 0, stream>>>(
      t.jobs, t.num_chunks, t.state, t.tiles, t.greater, t.equal, flag);
  if ((error = cudaGetLastError()) != cudaSuccess) return error;
  for (int first = 0; first < t.num_chunks; first += kMaxGridY) {
    const dim3 grid(tile_x, std::min(kMaxGridY, t.num_chunks - first));
    TopKTileEmitKernel<<<grid, kElementwiseBlock, 0, stream>>>(
        t.jobs, first, t.state, a, t.tile_size, t.tiles, t.greater, t.equal,
        flag, residual, t.indices, t.values);
    if ((error = cudaGetLastError()) != cudaSuccess) return error;
  }
  return cudaSuccess;
}

}  // namespace cuda_kernels
}  // namespace asgd
