#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/bf16_bits.h"
#include "compression/grad_codec.h"
#include "model/cuda/cuda_device.cuh"
#include "model/cuda/cuda_resident.h"

namespace asgd {
namespace cuda_kernels {
namespace {

constexpr int kGroupBlock = 256;  // a power of two (the reductions)

__global__ void FlagNonFiniteKernel(const float* grad, int64_t count,
                                    int* flag) {
  bool bad = false;
  for (int64_t e = GlobalThread(); e < count; e += GridThreads()) {
    bad |= !isfinite(grad[e]);
  }
  if (bad) atomicOr(flag, 1);
}

__global__ void AddUnlessFlaggedKernel(const float* grad, int64_t count,
                                       const int* flag, float* sum) {
  if (flag != nullptr && *flag != 0) return;
  for (int64_t e = GlobalThread(); e < count; e += GridThreads()) {
    sum[e] = __fadd_rn(sum[e], grad[e]);
  }
}

__global__ void ScaleKernel(const float* sum, int64_t count, float scale,
                            float* out) {
  for (int64_t e = GlobalThread(); e < count; e += GridThreads()) {
    out[e] = __fmul_rn(sum[e], scale);
  }
}

__global__ void ScaleToBf16Kernel(const float* sum, int64_t count,
                                  float scale, uint16_t* out) {
  for (int64_t e = GlobalThread(); e < count; e += GridThreads()) {
    out[e] = Bf16FromFloatBits(__float_as_uint(__fmul_rn(sum[e], scale)));
  }
}

// Bytes of `out` hold float32 values at any alignment.
__device__ void StoreFloat(char* p, float v) {
  const unsigned u = __float_as_uint(v);
  for (int b = 0; b < 4; ++b) p[b] = static_cast<char>((u >> (8 * b)) & 0xff);
}
__device__ float LoadFloat(const char* p) {
  unsigned u = 0;
  for (int b = 0; b < 4; ++b) {
    u |= static_cast<unsigned>(static_cast<unsigned char>(p[b])) << (8 * b);
  }
  return __uint_as_float(u);
}

// One block per group: a = sum * scale + residual, the two means.
__global__ void OneBitMeansKernel(const OneBitGroupJob* groups,
                                  const float* sum, float scale,
                                  const float* residual, float* a, char* out,
                                  int* flag) {
  __shared__ double s_neg[kGroupBlock], s_pos[kGroupBlock];
  __shared__ int64_t s_num_neg[kGroupBlock], s_num_pos[kGroupBlock];
  __shared__ int s_bad[kGroupBlock];
  const OneBitGroupJob g = groups[blockIdx.x];
  const int t = threadIdx.x;
  double neg = 0, pos = 0;
  int64_t num_neg = 0, num_pos = 0;
  int bad = 0;
  for (int64_t i = t; i < g.length; i += kGroupBlock) {
    const int64_t e = g.begin + i;
    const float v = __fadd_rn(__fmul_rn(sum[e], scale), residual[e]);
    a[e] = v;
    bad |= !isfinite(v);
    if (v < 0.0f) {
      neg += v;
      ++num_neg;
    } else {
      pos += v;
      ++num_pos;
    }
  }
  s_neg[t] = neg;
  s_pos[t] = pos;
  s_num_neg[t] = num_neg;
  s_num_pos[t] = num_pos;
  s_bad[t] = bad;
  __syncthreads();
  for (int half = kGroupBlock / 2; half > 0; half /= 2) {
    if (t < half) {
      s_neg[t] += s_neg[t + half];
      s_pos[t] += s_pos[t + half];
      s_num_neg[t] += s_num_neg[t + half];
      s_num_pos[t] += s_num_pos[t + half];
      s_bad[t] |= s_bad[t + half];
    }
    __syncthreads();
  }
  if (t == 0) {
    const float lo = s_num_neg[0] > 0
                         ? static_cast<float>(s_neg[0] / s_num_neg[0])
                         : 0.0f;
    const float hi = s_num_pos[0] > 0
                         ? static_cast<float>(s_pos[0] / s_num_pos[0])
                         : 0.0f;
    StoreFloat(out + g.level_offset, lo);
    StoreFloat(out + g.level_offset + 4, hi);
    if (s_bad[0]) atomicOr(flag, 1);
  }
}

// One block per group: residual = a - the level a decodes to.
__global__ void OneBitResidualKernel(const OneBitGroupJob* groups,
                                     const float* a, const char* out,
                                     const int* flag, float* residual) {
  if (*flag != 0) return;
  const OneBitGroupJob g = groups[blockIdx.x];
  const float lo = LoadFloat(out + g.level_offset);
  const float hi = LoadFloat(out + g.level_offset + 4);
  for (int64_t i = threadIdx.x; i < g.length; i += blockDim.x) {
    const int64_t e = g.begin + i;
    const float v = a[e];
    residual[e] = __fsub_rn(v, v >= 0.0f ? hi : lo);
  }
}

// Grid (x, chunk): each thread writes whole bytes of its chunk's bits.
__global__ void OneBitBitsKernel(const OneBitChunkJob* chunks, const float* a,
                                 char* out) {
  const OneBitChunkJob c = chunks[blockIdx.y];
  const int64_t bytes = (c.count + 7) / 8;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       b < bytes; b += stride) {
    unsigned bits = 0;
    for (int j = 0; j < 8; ++j) {
      const int64_t i = 8 * b + j;
      if (i < c.count && a[c.flat_begin + i] >= 0.0f) bits |= 1u << j;
    }
    out[c.bits_offset + b] = static_cast<char>(bits);
  }
}

}  // namespace

void OneBitJobs(const OneBitPlan& plan, std::vector<OneBitGroupJob>* groups,
                std::vector<OneBitChunkJob>* chunks) {
  groups->clear();
  chunks->clear();
  for (size_t c = 0; c < plan.chunks.size(); ++c) {
    const OneBitChunkPlan& p = plan.chunks[c];
    const int64_t levels = plan.offsets[c] + kGradCodecHeaderBytes;
    int64_t k = 0;
    for (int64_t from = 0; from < p.count; ++k) {
      const int64_t to =
          std::min(p.count, k == 0 ? p.first_group : from + p.group_size);
      groups->push_back({p.flat_begin + from, to - from, levels + 8 * k});
      from = to;
    }
    chunks->push_back({p.flat_begin, p.count, levels + 8 * k});
  }
}

cudaError_t LaunchFlagNonFinite(const float* grad, int64_t count, int* flag,
                                cudaStream_t stream) {
  FlagNonFiniteKernel<<<ElementwiseGrid(count), kElementwiseBlock, 0,
                        stream>>>(grad, count, flag);
  return cudaGetLastError();
}

cudaError_t LaunchAddUnlessFlagged(const float* grad, int64_t count,
                                   const int* flag, float* sum,
                                   cudaStream_t stream) {
  AddUnlessFlaggedKernel<<<ElementwiseGrid(count), kElementwiseBlock, 0,
                           stream>>>(grad, count, flag, sum);
  return cudaGetLastError();
}

cudaError_t LaunchScale(const float* sum, int64_t count, float scale,
                        float* out, cudaStream_t stream) {
  ScaleKernel<<<ElementwiseGrid(count), kElementwiseBlock, 0, stream>>>(
      sum, count, scale, out);
  return cudaGetLastError();
}

cudaError_t LaunchScaleToBf16(const float* sum, int64_t count, float scale,
                              uint16_t* out, cudaStream_t stream) {
  ScaleToBf16Kernel<<<ElementwiseGrid(count), kElementwiseBlock, 0, stream>>>(
      sum, count, scale, out);
  return cudaGetLastError();
}

cudaError_t LaunchAdd(const float* values, int64_t count, float* sum,
                      cudaStream_t stream) {
  return LaunchAddUnlessFlagged(values, count, nullptr, sum, stream);
}

cudaError_t LaunchOneBitEncode(const OneBitGroupJob* groups, int64_t num_groups,
                               const OneBitChunkJob* chunks, int num_chunks,
                               int64_t max_chunk_count, const float* sum,
                               float scale, float* residual, float* a,
                               char* out, int* flag, cudaStream_t stream) {
  if (num_groups == 0) return cudaSuccess;
  // Groups go one per block on the grid's x dimension (up to 2^31 - 1).
  OneBitMeansKernel<<<static_cast<unsigned>(num_groups), kGroupBlock, 0,
                      stream>>>(groups, sum, scale, residual, a, out, flag);
  cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return error;
  OneBitResidualKernel<<<static_cast<unsigned>(num_groups), kGroupBlock, 0,
                         stream>>>(groups, a, out, flag, residual);
  error = cudaGetLastError();
  if (error != cudaSuccess) return error;
  const int64_t bytes = (max_chunk_count + 7) / 8;
  const unsigned x = static_cast<unsigned>(std::min<int64_t>(
      (bytes + kElementwiseBlock - 1) / kElementwiseBlock, 1024));
  constexpr int kMaxGridY = 65535;
  for (int first = 0; first < num_chunks; first += kMaxGridY) {
    const dim3 grid(x, static_cast<unsigned>(
                           std::min(kMaxGridY, num_chunks - first)));
    OneBitBitsKernel<<<grid, kElementwiseBlock, 0, stream>>>(chunks + first,
                                                             a, out);
    error = cudaGetLastError();
    if (error != cudaSuccess) return error;
  }
  return cudaSuccess;
}

}  // namespace cuda_kernels
}  // namespace asgd
