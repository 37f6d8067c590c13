#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/cuda/cuda_backend.h"
#include "model/cuda/cuda_util.h"
#include "model/cuda/layer_math.h"

namespace asgd {
namespace cuda {

absl::Status CudaError(absl::string_view call, cudaError_t error) {
  std::string message = absl::StrCat(call, " failed: ", cudaGetErrorName(error),
                                     " (", cudaGetErrorString(error), ")");
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
      return absl::UnavailableError(message);
    case cudaErrorInvalidDevice:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status CublasError(absl::string_view call, cublasStatus_t status) {
  std::string message =
      absl::StrCat(call, " failed: ", cublasGetStatusName(status), " (",
                   cublasGetStatusString(status), ")");
  if (status == CUBLAS_STATUS_ALLOC_FAILED) {
    return absl::ResourceExhaustedError(message);
  }
  return absl::InternalError(message);
}

absl::StatusOr<int> DeviceCount() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();  // clear it; the runtime keeps reporting it anyway
    return absl::UnavailableError(absl::StrCat(
        "no CUDA device: cudaGetDeviceCount returned ", cudaGetErrorName(error),
        " (", cudaGetErrorString(error), ")"));
  }
  if (count <= 0) {
    return absl::UnavailableError(
        "no CUDA device: cudaGetDeviceCount found 0 devices");
  }
  return count;
}

absl::Status CheckDeviceOrdinal(int device) {
  ASGD_ASSIGN_OR_RETURN(const int count, DeviceCount());
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CUDA device ", device, " outside [0, ", count, ") on this machine"));
  }
  return absl::OkStatus();
}

absl::Status CheckCudaOptions(const CudaOptions& options) {
  if (options.math != CudaOptions::MathMode::kFp32 &&
      options.math != CudaOptions::MathMode::kTf32) {
    return absl::InvalidArgumentError("unknown CudaOptions::math");
  }
  if (options.conv_block_rows < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaOptions::conv_block_rows must be >= 0, got ",
                     options.conv_block_rows));
  }
  if (options.conv_dw_slice_rows < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaOptions::conv_dw_slice_rows must be >= 0, got ",
                     options.conv_dw_slice_rows));
  }
  return CheckDeviceOrdinal(options.device);
}

absl::StatusOr<Stream> CreateStream() {
  cudaStream_t s = nullptr;
  ASGD_CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return Stream(s);
}

absl::StatusOr<Event> CreateEvent() {
  cudaEvent_t e = nullptr;
  ASGD_CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return Event(e);
}

absl::StatusOr<Cublas> CreateCublas(cudaStream_t stream,
                                    CudaOptions::MathMode math) {
  cublasHandle_t handle = nullptr;
  ASGD_CUBLAS_RETURN_IF_ERROR(cublasCreate(&handle));
  Cublas cublas(handle);
  ASGD_CUBLAS_RETURN_IF_ERROR(cublasSetStream(cublas.get(), stream));
  ASGD_CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(
      cublas.get(), math == CudaOptions::MathMode::kTf32
                        ? CUBLAS_TF32_TENSOR_OP_MATH
                        : CUBLAS_DEFAULT_MATH));
  return cublas;
}

absl::Status Gemm(const Context& ctx, bool trans_a, bool trans_b, int m, int n,
                  int k, const float* a, int lda, const float* b, int ldb,
                  float beta, float* c, int ldc) {
  if (m < 0 || n < 0 || k < 0) {
    return absl::InternalError(
        absl::StrCat("Gemm with negative size m=", m, ", n=", n, ", k=", k));
  }
  if (m == 0 || n == 0) return absl::OkStatus();
  if (k == 0) {
    // C = beta C with nothing to add.
    if (beta == 1.0f) return absl::OkStatus();
    if (beta != 0.0f) {
      return absl::InternalError("Gemm with k=0 supports beta 0 or 1 only");
    }
    ASGD_CUDA_RETURN_IF_ERROR(cudaMemset2DAsync(
        c, static_cast<size_t>(ldc) * sizeof(float), 0,
        static_cast<size_t>(n) * sizeof(float), m, ctx.stream));
    return absl::OkStatus();
  }
  const float alpha = 1.0f;
  const cublasComputeType_t compute = ctx.math == CudaOptions::MathMode::kTf32
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  const cuda_ops::ColumnMajorGemm g =
      cuda_ops::AsColumnMajor(trans_a, trans_b, m, n, k, a, lda, b, ldb);
  const cublasStatus_t status = cublasGemmEx(
      ctx.cublas, g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N,
      g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n, g.k, &alpha,
      g.first, CUDA_R_32F, g.ld_first, g.second, CUDA_R_32F, g.ld_second, &beta,
      c, CUDA_R_32F, ldc, compute, CUBLAS_GEMM_DEFAULT);
  if (status != CUBLAS_STATUS_SUCCESS) {
    return CublasError(
        absl::StrCat("cublasGemmEx(row-major m=", m, ", n=", n, ", k=", k,
                     ", trans_a=", trans_a, ", trans_b=", trans_b, ")"),
        status);
  }
  return absl::OkStatus();
}

absl::Status GemmStridedBatched(const Context& ctx, bool trans_a, bool trans_b,
                                int m, int n, int k, const float* a, int lda,
                                int64_t stride_a, const float* b, int ldb,
                                int64_t stride_b, float beta, float* c,
                                int ldc, int64_t stride_c, int batch) {
  if (m < 0 || n < 0 || k <= 0 || batch < 0) {
    return absl::InternalError(
        absl::StrCat("GemmStridedBatched with m=", m, ", n=", n, ", k=", k,
                     ", batch=", batch, " (k must be > 0)"));
  }
  if (m == 0 || n == 0 || batch == 0) return absl::OkStatus();
  const float alpha = 1.0f;
  const cublasComputeType_t compute = ctx.math == CudaOptions::MathMode::kTf32
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  const cuda_ops::ColumnMajorBatch cb = cuda_ops::AsColumnMajorBatch(
      trans_a, trans_b, m, n, k, a, lda, stride_a, b, ldb, stride_b);
  const cuda_ops::ColumnMajorGemm& g = cb.gemm;
  const cublasStatus_t status = cublasGemmStridedBatchedEx(
      ctx.cublas, g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N,
      g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n, g.k, &alpha,
      g.first, CUDA_R_32F, g.ld_first, cb.stride_first, g.second, CUDA_R_32F,
      g.ld_second, cb.stride_second, &beta, c, CUDA_R_32F, ldc, stride_c,
      batch, compute, CUBLAS_GEMM_DEFAULT);
  if (status != CUBLAS_STATUS_SUCCESS) {
    return CublasError(
        absl::StrCat("cublasGemmStridedBatchedEx(row-major m=", m, ", n=", n,
                     ", k=", k, ", batch=", batch, ")"),
        status);
  }
  return absl::OkStatus();
}

}  // namespace cuda

// The device queries of cuda_backend.h.
absl::Status CudaDeviceStatus() { return cuda::DeviceCount().status(); }

bool CudaDeviceAvailable() { return CudaDeviceStatus().ok(); }

absl::StatusOr<std::string> CudaDeviceName(int device) {
  ASGD_RETURN_IF_ERROR(cuda::CheckDeviceOrdinal(device));
  cudaDeviceProp prop;
  ASGD_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
  return std::string(prop.name);
}

}  // namespace asgd
