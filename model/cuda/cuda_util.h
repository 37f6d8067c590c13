// What the CUDA backend's pieces share: CUDA and cuBLAS errors as
// absl::Status, RAII owners of device memory, pinned host memory, streams,
// events and cuBLAS handles, and a row-major GEMM.
//
// Internal to the plugin (//model/cuda:cuda_backend): this header includes
// CUDA headers and is compiled only by nvcc. Nothing built without nvcc may
// include it.
//
// Thread-safety: the free functions are thread-safe; an owner object is used
// from one thread at a time.
#ifndef ASGD_MODEL_CUDA_CUDA_UTIL_H_
#define ASGD_MODEL_CUDA_CUDA_UTIL_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/cuda/cuda_options.h"

namespace asgd {
namespace cuda {

// `call` failed with `error`: ResourceExhausted for out-of-memory,
// Unavailable for a missing device or driver, InvalidArgument for a bad
// device ordinal, Internal otherwise; the message names the call and the
// error.
absl::Status CudaError(absl::string_view call, cudaError_t error);
// Likewise for cuBLAS (ResourceExhausted for CUBLAS_STATUS_ALLOC_FAILED).
absl::Status CublasError(absl::string_view call, cublasStatus_t status);

#define ASGD_CUDA_RETURN_IF_ERROR(expr)                        \
  do {                                                         \
    const cudaError_t asgd_cuda_error_ = (expr);               \
    if (asgd_cuda_error_ != cudaSuccess) {                     \
      return ::asgd::cuda::CudaError(#expr, asgd_cuda_error_); \
    }                                                          \
  } while (false)

#define ASGD_CUBLAS_RETURN_IF_ERROR(expr)                           \
  do {                                                              \
    const cublasStatus_t asgd_cublas_status_ = (expr);              \
    if (asgd_cublas_status_ != CUBLAS_STATUS_SUCCESS) {             \
      return ::asgd::cuda::CublasError(#expr, asgd_cublas_status_); \
    }                                                               \
  } while (false)

// RAII owners. Destructors ignore errors: there is nobody to report them to,
// and a failed free after a device fault must not abort the process.

// `count` elements of T in device memory (cudaMalloc; page-locked host memory
// with cudaMallocHost when kPinnedHost), freed on destruction. A count of 0
// allocates nothing (get() is null).
enum class Memory { kDevice, kPinnedHost };

template <typename T, Memory kMemory>
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)) {}
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      Reset();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { Reset(); }

  static absl::StatusOr<Buffer> Create(int64_t count) {
    Buffer buffer;
    if (count <= 0) return buffer;
    void* data = nullptr;
    const size_t bytes = static_cast<size_t>(count) * sizeof(T);
    if (kMemory == Memory::kDevice) {
      ASGD_CUDA_RETURN_IF_ERROR(cudaMalloc(&data, bytes));
    } else {
      ASGD_CUDA_RETURN_IF_ERROR(cudaMallocHost(&data, bytes));
    }
    buffer.data_ = static_cast<T*>(data);
    buffer.size_ = count;
    return buffer;
  }

  T* get() const { return data_; }
  int64_t size() const { return size_; }

 private:
  void Reset() {
    if (data_ != nullptr) {
      if (kMemory == Memory::kDevice) {
        cudaFree(data_);
      } else {
        cudaFreeHost(data_);
      }
    }
    data_ = nullptr;
    size_ = 0;
  }

  T* data_ = nullptr;
  int64_t size_ = 0;
};

template <typename T>
using DeviceBuffer = Buffer<T, Memory::kDevice>;
template <typename T>
using PinnedHostBuffer = Buffer<T, Memory::kPinnedHost>;

struct StreamDeleter {
  void operator()(cudaStream_t s) const { cudaStreamDestroy(s); }
};
struct EventDeleter {
  void operator()(cudaEvent_t e) const { cudaEventDestroy(e); }
};
struct CublasDeleter {
  void operator()(cublasHandle_t h) const { cublasDestroy(h); }
};
using Stream =
    std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDeleter>;
using Event = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDeleter>;
using Cublas =
    std::unique_ptr<std::remove_pointer_t<cublasHandle_t>, CublasDeleter>;

// The number of CUDA devices, or kUnavailable saying why there is none.
absl::StatusOr<int> DeviceCount();
// OK when `device` is a device of this machine; kUnavailable without any,
// InvalidArgument for an ordinal outside [0, DeviceCount()).
absl::Status CheckDeviceOrdinal(int device);

// OK for options a backend or range can use: a known math mode,
// conv_block_rows >= 0 (InvalidArgument otherwise) and a device of this
// machine (CheckDeviceOrdinal).
absl::Status CheckCudaOptions(const CudaOptions& options);

// A non-blocking stream; an event without timing.
absl::StatusOr<Stream> CreateStream();
absl::StatusOr<Event> CreateEvent();
// A cuBLAS handle bound to `stream`, with tensor-core TF32 math for kTf32
// (plain fp32 GEMMs otherwise).
absl::StatusOr<Cublas> CreateCublas(cudaStream_t stream,
                                    CudaOptions::MathMode math);

class OpTimer;  // op_timer.h

// What a layer computes with: the stream every kernel and GEMM of a call goes
// to, a cuBLAS handle bound to that stream, and the GEMM precision. With a
// timer (profiling only, cuda_profile.h), every step a CudaExec enqueues is
// bracketed by the timer's events.
struct Context {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  CudaOptions::MathMode math = CudaOptions::MathMode::kTf32;
  OpTimer* timer = nullptr;
};

// C [m, n] = op(A) op(B) + beta C for row-major matrices with leading
// dimensions lda, ldb, ldc, exactly as
//   cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
//               trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
//               a, lda, b, ldb, beta, c, ldc)
// so that every GEMM of a CUDA layer reads like the CPU layer's sgemm it
// mirrors (cuBLAS is column-major: the call is AsColumnMajor's, layer_math.h).
// With beta 0, C is not read. Nothing is enqueued when m or n is 0; when k is
// 0, C is scaled by beta (zeroed for beta 0; beta must be 0 or 1).
absl::Status Gemm(const Context& ctx, bool trans_a, bool trans_b, int m, int n,
                  int k, const float* a, int lda, const float* b, int ldb,
                  float beta, float* c, int ldc);

// For j in [0, batch): Gemm on a + j * stride_a, b + j * stride_b and
// c + j * stride_c, as one cublasGemmStridedBatchedEx call (C matrices must
// not overlap). k must be > 0; nothing is enqueued when m, n or batch is 0.
absl::Status GemmStridedBatched(const Context& ctx, bool trans_a, bool trans_b,
                                int m, int n, int k, const float* a, int lda,
                                int64_t stride_a, const float* b, int ldb,
                                int64_t stride_b, float beta, float* c, int ldc,
                                int64_t stride_c, int batch);

}  // namespace cuda
}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_CUDA_UTIL_H_
