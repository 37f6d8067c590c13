// The CUDA kernels of the CUDA ModelBackend (model/cuda/cuda_backend.h) that
// are reductions over rows or columns: softmax with cross-entropy, argmax,
// column and channel sums. (The layers' element-wise passes are the ops of
// layer_math.h, dense_impl.h, conv_impl.h and lstm_impl.h, launched by
// CudaExec, cuda_exec.cuh.) Internal to //model/cuda:cuda_backend and
// compiled only by nvcc; other code should use CreateCudaBackend().
//
// All matrices are row-major and live in device memory. Every launcher
// enqueues its kernel on `stream` and returns cudaGetLastError() (launch
// errors; faults during execution surface at the next synchronization). The
// results are deterministic: no atomics, fixed reduction orders.
//
// Thread-safety: the launchers keep no state.
#ifndef ASGD_MODEL_CUDA_CUDA_KERNELS_H_
#define ASGD_MODEL_CUDA_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace asgd {
namespace cuda_kernels {

// For each row i of `logits` [rows, cols], with p = softmax(logits[i]):
//   dlogits[i][k] = (p[k] - (k == labels[i])) * scale
//   row_loss[i] = -log(max(p[labels[i]], 1e-30))
//   row_correct[i] = (argmax_k logits[i][k] == labels[i])  (first maximum)
// and for a row with a negative label (unlabelled) dlogits[i] = 0,
// row_loss[i] = row_correct[i] = 0. Labels must be < cols. `dlogits` must not
// alias `logits`.
cudaError_t LaunchSoftmaxCrossEntropy(const float* logits,
                                      const int32_t* labels, int rows, int cols,
                                      float scale, float* dlogits,
                                      float* row_loss, int32_t* row_correct,
                                      cudaStream_t stream);

// out[i] = argmax_k logits[i][k] for logits [rows, cols]; ties go to the
// smallest k.
cudaError_t LaunchRowArgmax(const float* logits, int rows, int cols,
                            int32_t* out, cudaStream_t stream);

// sums[j] = sum_i m[i][j] for m [rows, cols].
cudaError_t LaunchColumnSums(const float* m, int rows, int cols, float* sums,
                             cudaStream_t stream);

// sums[k] = sum over i in [0, rows), q in [0, group) of
// m[i][k * group + q] for m [rows, groups * group]: the per-channel sums of
// channel-major rows (a conv layer's bias gradient). One block per channel.
cudaError_t LaunchChannelSums(const float* m, int rows, int groups, int group,
                              float* sums, cudaStream_t stream);

}  // namespace cuda_kernels
}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_CUDA_KERNELS_H_
