// The kernels of the CUDA backend's resident model (model/backend.h
// LoadModel .. TakeTopK): the gradient sum, its finiteness check, the
// average, the 1-bit encoding with error feedback of a whole OneBitPlan in
// three launches, and the top-k encoding of a whole TopKPlan (cuda_top_k.cu,
// the steps of top_k_impl.h). Every float operation is rounded on its own
// (__fmul_rn, __fadd_rn, __fsub_rn: no fused multiply-add), in the order of
// the host references (compression/one_bit_plan.h EncodeOneBitPlan,
// compression/top_k_plan.h EncodeTopKPlan), so the averaged values, the
// bits and the top-k entries are the references' bit for bit; a 1-bit
// group's means are summed in double in another order than the host's, so
// they agree after the rounding to float32 except, rarely, by one unit.
//
// Internal to the plugin. The launch functions enqueue on `stream` and
// return the launch error; device pointers throughout.
#ifndef ASGD_MODEL_CUDA_CUDA_RESIDENT_H_
#define ASGD_MODEL_CUDA_CUDA_RESIDENT_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "compression/one_bit_plan.h"
#include "model/cuda/top_k_impl.h"

namespace asgd {
namespace cuda_kernels {

// One quantisation group of a plan: elements [begin, begin + length) of the
// flat model; its two means go to bytes [level_offset, level_offset + 8).
struct OneBitGroupJob {
  int64_t begin;
  int64_t length;
  int64_t level_offset;
};

// One chunk's bit section: its elements [flat_begin, flat_begin + count)
// and where its ceil(count / 8) bytes go.
struct OneBitChunkJob {
  int64_t flat_begin;
  int64_t count;
  int64_t bits_offset;
};

// The jobs of `plan` (host side; validated plans only).
void OneBitJobs(const OneBitPlan& plan, std::vector<OneBitGroupJob>* groups,
                std::vector<OneBitChunkJob>* chunks);

// *flag = 1 if any of grad[0, count) is NaN or Inf (the caller zeroes it).
cudaError_t LaunchFlagNonFinite(const float* grad, int64_t count, int* flag,
                                cudaStream_t stream);

// sum[i] += grad[i] for i < count, unless *flag is set.
cudaError_t LaunchAddUnlessFlagged(const float* grad, int64_t count,
                                   const int* flag, float* sum,
                                   cudaStream_t stream);

// out[i] = sum[i] * scale (rounded once).
cudaError_t LaunchScale(const float* sum, int64_t count, float scale,
                        float* out, cudaStream_t stream);

// out[i] = the bfloat16 of sum[i] * scale (the product rounded once, then
// to bfloat16 as common/bf16_bits.h rounds).
cudaError_t LaunchScaleToBf16(const float* sum, int64_t count, float scale,
                              uint16_t* out, cudaStream_t stream);

// sum[i] += values[i] (RestoreResidual).
cudaError_t LaunchAdd(const float* values, int64_t count, float* sum,
                      cudaStream_t stream);

// The 1-bit encoding of a plan: a = sum * scale + residual into `a` (model
// sized scratch), every group's means into `out`, *flag = 1 on a NaN/Inf;
// then, unless *flag, residual = a - decoded(a) and every chunk's bits into
// `out`. The chunks' headers are the caller's.
cudaError_t LaunchOneBitEncode(const OneBitGroupJob* groups, int64_t num_groups,
                               const OneBitChunkJob* chunks, int num_chunks,
                               int64_t max_chunk_count, const float* sum,
                               float scale, float* residual, float* a,
                               char* out, int* flag, cudaStream_t stream);

// The device tables and scratch of a top-k encoding (cuda_top_k.cu):
// num_chunks jobs, a state and kTopKMaxBins histogram bins per chunk,
// `tiles` tiles of tile_size elements per chunk (enough for max_count),
// and the entries of all chunks (the plan's total k).
struct TopKTables {
  const cuda_ops::TopKChunkJob* jobs = nullptr;
  int num_chunks = 0;
  int64_t max_count = 0;
  cuda_ops::TopKChunkState* state = nullptr;
  uint32_t* hist = nullptr;
  int64_t tile_size = 0;
  int64_t tiles = 0;
  int64_t* greater = nullptr;  // num_chunks * tiles
  int64_t* equal = nullptr;    // num_chunks * tiles
  uint32_t* indices = nullptr;
  float* values = nullptr;
};

// The top-k encoding of every chunk (top_k_impl.h's steps): a = sum * scale
// + residual into `a` (model-sized scratch), *flag |= kTopKNonFinite on a
// NaN/Inf (kTopKInconsistent: a count that cannot be); unless *flag, each
// chunk's entries (chunk-relative indices, values) into the tables and
// residual = a, or 0 where sent.
cudaError_t LaunchTopKEncode(const TopKTables& tables, const float* sum,
                             float scale, float* residual, float* a, int* flag,
                             cudaStream_t stream);

}  // namespace cuda_kernels
}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_CUDA_RESIDENT_H_
