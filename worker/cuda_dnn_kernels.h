// The CUDA kernels of the CUDA DnnBackend (worker/cuda_dnn.h), behind thin
// launchers so that only worker/cuda_dnn_kernels.cu needs nvcc. Internal to
// //worker:cuda_dnn; other code should use CreateCudaDnn().
//
// All matrices are row-major and live in device memory. Every launcher
// enqueues its kernel on `stream` and returns cudaGetLastError() (launch
// errors; faults during execution surface at the next synchronization). The
// results are deterministic: no atomics, fixed reduction orders.
//
// Thread-safety: the launchers keep no state.
#ifndef ASGD_WORKER_CUDA_DNN_KERNELS_H_
#define ASGD_WORKER_CUDA_DNN_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace asgd {
namespace cuda_kernels {

enum class Act : int { kIdentity = 0, kRelu = 1, kSigmoid = 2 };

// z[i][j] = act(z[i][j] + bias[j]) for z [rows, cols].
cudaError_t LaunchBiasActivation(float* z, const float* bias, int rows,
                                 int cols, Act act, cudaStream_t stream);

// Multiplies the gradient `da` by the activation's derivative, written in
// terms of the activation's output `a` (both `count` floats):
//   relu:    da = a > 0 ? da : 0
//   sigmoid: da *= a * (1 - a)
//   identity: no change.
cudaError_t LaunchActivationBackward(float* da, const float* a, int64_t count,
                                     Act act, cudaStream_t stream);

// For each row i of `logits` [rows, cols], with p = softmax(logits[i]):
//   dlogits[i][k] = (p[k] - (k == labels[i])) / rows
//   row_loss[i] = -log(max(p[labels[i]], 1e-30))
//   row_correct[i] = (argmax_k logits[i][k] == labels[i])  (first maximum)
// Labels must be in [0, cols). `dlogits` must not alias `logits`.
cudaError_t LaunchSoftmaxCrossEntropy(const float* logits,
                                      const int32_t* labels, int rows, int cols,
                                      float* dlogits, float* row_loss,
                                      int32_t* row_correct,
                                      cudaStream_t stream);

// out[i] = argmax_k logits[i][k] for logits [rows, cols]; ties go to the
// smallest k.
cudaError_t LaunchRowArgmax(const float* logits, int rows, int cols,
                            int32_t* out, cudaStream_t stream);

// sums[j] = sum_i m[i][j] for m [rows, cols].
cudaError_t LaunchColumnSums(const float* m, int rows, int cols, float* sums,
                             cudaStream_t stream);

}  // namespace cuda_kernels
}  // namespace asgd

#endif  // ASGD_WORKER_CUDA_DNN_KERNELS_H_
