#include "model/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "model/batch_check.h"
#include "model/cuda/cuda_kernels.h"

namespace asgd {
namespace {

// ---------------------------------------------------------------------------
// CUDA / cuBLAS errors as absl::Status.

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

#define ASGD_CUDA_RETURN_IF_ERROR(expr)          \
  do {                                           \
    const cudaError_t asgd_cuda_error_ = (expr); \
    if (asgd_cuda_error_ != cudaSuccess) {       \
      return CudaError(#expr, asgd_cuda_error_); \
    }                                            \
  } while (false)

#define ASGD_CUBLAS_RETURN_IF_ERROR(expr)               \
  do {                                                  \
    const cublasStatus_t asgd_cublas_status_ = (expr);  \
    if (asgd_cublas_status_ != CUBLAS_STATUS_SUCCESS) { \
      return CublasError(#expr, asgd_cublas_status_);   \
    }                                                   \
  } while (false)

// ---------------------------------------------------------------------------
// RAII owners. Destructors ignore errors: there is nobody to report them to,
// and a failed free after a device fault must not abort the process.

// `count` elements of T in device memory (cudaMalloc), freed on destruction.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      Reset();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { Reset(); }

  static absl::StatusOr<DeviceBuffer> Create(int64_t count) {
    DeviceBuffer buffer;
    void* data = nullptr;
    ASGD_CUDA_RETURN_IF_ERROR(
        cudaMalloc(&data, static_cast<size_t>(count) * sizeof(T)));
    buffer.data_ = static_cast<T*>(data);
    buffer.size_ = count;
    return buffer;
  }

  T* get() const { return data_; }
  int64_t size() const { return size_; }

 private:
  void Reset() {
    if (data_ != nullptr) cudaFree(data_);
    data_ = nullptr;
    size_ = 0;
  }

  T* data_ = nullptr;
  int64_t size_ = 0;
};

// `count` elements of T in page-locked host memory (cudaMallocHost), the
// staging area of asynchronous copies; freed on destruction.
template <typename T>
class PinnedHostBuffer {
 public:
  PinnedHostBuffer() = default;
  PinnedHostBuffer(PinnedHostBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)) {}
  PinnedHostBuffer& operator=(PinnedHostBuffer&& other) noexcept {
    if (this != &other) {
      Reset();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;
  ~PinnedHostBuffer() { Reset(); }

  static absl::StatusOr<PinnedHostBuffer> Create(int64_t count) {
    PinnedHostBuffer buffer;
    void* data = nullptr;
    ASGD_CUDA_RETURN_IF_ERROR(
        cudaMallocHost(&data, static_cast<size_t>(count) * sizeof(T)));
    buffer.data_ = static_cast<T*>(data);
    buffer.size_ = count;
    return buffer;
  }

  T* get() const { return data_; }
  int64_t size() const { return size_; }

 private:
  void Reset() {
    if (data_ != nullptr) cudaFreeHost(data_);
    data_ = nullptr;
    size_ = 0;
  }

  T* data_ = nullptr;
  int64_t size_ = 0;
};

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

// Device count, or kUnavailable saying why there is none.
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

// Host<->device copies move in pieces of at most this many floats (4 MiB), so
// that the host's memcpy into pinned memory of one piece overlaps the DMA of
// the previous one.
constexpr int64_t kChunkFloats = int64_t{1} << 20;

// ---------------------------------------------------------------------------
// The backend.
//
// Streams: compute_ runs GEMMs and kernels; copy_ runs every host<->device
// copy. Per call:
//   copy_:    inputs, labels, layer 0 params  -> params_ready_[0]
//             layer 1 params                   -> params_ready_[1] ...
//   compute_: wait params_ready_[l]; forward layer l   (l = 0..L)
//             softmax/loss; backward layer l -> grad_computed_[l] (l = L..0)
//   copy_:    wait grad_computed_[l]; download layer l's gradient in chunks,
//             each chunk -> its grad_downloaded_ event
//   host:     waits for each chunk's event and copies it out of pinned memory
//             while later layers are still being computed and downloaded.
class CudaBackend final : public ModelBackend {
 public:
  static absl::StatusOr<std::unique_ptr<ModelBackend>> Create(
      const ModelSpec& spec, int max_batch, const CudaOptions& options) {
    ASGD_RETURN_IF_ERROR(ValidateModelSpec(spec));
    if (max_batch < 1) {
      return absl::InvalidArgumentError("max_rows must be at least 1");
    }
    for (const LayerSpec& layer : spec.layers) {
      if (layer.kind != LayerKind::kDense) {
        return absl::UnimplementedError(absl::StrCat(
            "the CUDA backend has no ", LayerKindName(layer.kind),
            " layers; use --backend=cpu for this model"));
      }
    }
    if (options.math != CudaOptions::MathMode::kFp32 &&
        options.math != CudaOptions::MathMode::kTf32) {
      return absl::InvalidArgumentError("unknown CudaOptions::math");
    }
    ASGD_RETURN_IF_ERROR(CheckDeviceOrdinal(options.device));
    std::unique_ptr<CudaBackend> dnn(new CudaBackend(spec, max_batch, options));
    ASGD_RETURN_IF_ERROR(dnn->Init());
    return std::unique_ptr<ModelBackend>(std::move(dnn));
  }

  ~CudaBackend() override {
    // Nothing is in flight after a successful call; after a failed one, let
    // the streams finish before their buffers go.
    if (cudaSetDevice(options_.device) == cudaSuccess) Drain();
  }

  absl::string_view name() const override { return "cuda"; }
  const ModelSpec& spec() const override { return spec_; }
  int max_rows() const override { return max_batch_; }

  absl::StatusOr<BatchResult> ComputeGradient(absl::Span<const float> params,
                                              const Batch& batch,
                                              absl::Span<float> grad) override {
    ASGD_RETURN_IF_ERROR(
        CheckBatch(spec_, max_batch_, num_params_, params, batch, true));
    if (static_cast<int64_t>(grad.size()) != num_params_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gradient buffer has ", grad.size(), " floats, want ", num_params_));
    }
    absl::StatusOr<BatchResult> result =
        RunGradient(params, batch.inputs, batch.labels, grad);
    if (!result.ok()) Drain();
    return result;
  }

  absl::Status LogPosteriors(absl::Span<const float> params,
                             const Batch& batch,
                             absl::Span<float> out) override {
    ASGD_RETURN_IF_ERROR(
        CheckBatch(spec_, max_batch_, num_params_, params, batch, false));
    const int64_t want = int64_t{batch.rows()} * spec_.num_classes;
    if (static_cast<int64_t>(out.size()) != want) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output has ", out.size(), " floats, want ", want));
    }
    absl::Status status = RunLogPosteriors(params, batch.inputs, out);
    if (!status.ok()) Drain();
    return status;
  }

  absl::Status Predict(absl::Span<const float> params, const Batch& batch,
                       absl::Span<int32_t> out) override {
    ASGD_RETURN_IF_ERROR(
        CheckBatch(spec_, max_batch_, num_params_, params, batch, false));
    if (static_cast<int>(out.size()) != batch.rows()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output has ", out.size(), " entries, want ", batch.rows()));
    }
    absl::Status status = RunPredict(params, batch.inputs, out);
    if (!status.ok()) Drain();
    return status;
  }

 private:
  struct Chunk {
    int64_t offset;  // into the flat parameter vector
    int64_t count;
  };

  CudaBackend(const ModelSpec& spec, int max_batch, const CudaOptions& options)
      : spec_(spec),
        max_batch_(max_batch),
        options_(options),
        num_params_(ModelParamCount(spec)) {
    int64_t offset = 0;
    for (int l = 0; l < num_layers(); ++l) {
      const int64_t in = layer_in(l), out = layer_out(l);
      weight_offset_.push_back(offset);
      bias_offset_.push_back(offset + out * in);
      // Layer l's weight and bias are one contiguous slice.
      std::vector<Chunk> chunks;
      const int64_t end = offset + out * in + out;
      for (int64_t c = offset; c < end; c += kChunkFloats) {
        chunks.push_back({c, std::min(kChunkFloats, end - c)});
      }
      layer_chunks_.push_back(std::move(chunks));
      offset = end;
    }
  }

  // Allocates everything; called once by Create().
  absl::Status Init() {
    ASGD_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    ASGD_ASSIGN_OR_RETURN(compute_, CreateStream());
    ASGD_ASSIGN_OR_RETURN(copy_, CreateStream());
    cublasHandle_t handle = nullptr;
    ASGD_CUBLAS_RETURN_IF_ERROR(cublasCreate(&handle));
    cublas_.reset(handle);
    ASGD_CUBLAS_RETURN_IF_ERROR(cublasSetStream(cublas_.get(), compute_.get()));
    ASGD_CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(
        cublas_.get(), options_.math == CudaOptions::MathMode::kTf32
                           ? CUBLAS_TF32_TENSOR_OP_MATH
                           : CUBLAS_DEFAULT_MATH));

    const int layers = num_layers();
    for (int l = 0; l < layers; ++l) {
      ASGD_ASSIGN_OR_RETURN(Event ready, CreateEvent());
      params_ready_.push_back(std::move(ready));
      ASGD_ASSIGN_OR_RETURN(Event computed, CreateEvent());
      grad_computed_.push_back(std::move(computed));
      std::vector<Event> downloaded;
      for (size_t c = 0; c < layer_chunks_[l].size(); ++c) {
        ASGD_ASSIGN_OR_RETURN(Event e, CreateEvent());
        downloaded.push_back(std::move(e));
      }
      grad_downloaded_.push_back(std::move(downloaded));
    }
    ASGD_ASSIGN_OR_RETURN(predicted_, CreateEvent());

    const int64_t batch = max_batch_;
    int64_t widest = spec_.input_dim();
    for (int l = 0; l < layers; ++l) widest = std::max<int64_t>(widest, layer_out(l));
    ASGD_ASSIGN_OR_RETURN(d_params_, DeviceBuffer<float>::Create(num_params_));
    ASGD_ASSIGN_OR_RETURN(d_grad_, DeviceBuffer<float>::Create(num_params_));
    ASGD_ASSIGN_OR_RETURN(d_inputs_,
                          DeviceBuffer<float>::Create(batch * spec_.input_dim()));
    ASGD_ASSIGN_OR_RETURN(d_labels_, DeviceBuffer<int32_t>::Create(batch));
    for (int l = 0; l < layers; ++l) {
      ASGD_ASSIGN_OR_RETURN(
          DeviceBuffer<float> acts,
          DeviceBuffer<float>::Create(batch * layer_out(l)));
      d_acts_.push_back(std::move(acts));
    }
    ASGD_ASSIGN_OR_RETURN(d_delta_,
                          DeviceBuffer<float>::Create(batch * widest));
    ASGD_ASSIGN_OR_RETURN(d_delta_prev_,
                          DeviceBuffer<float>::Create(batch * widest));
    ASGD_ASSIGN_OR_RETURN(d_row_loss_, DeviceBuffer<float>::Create(batch));
    ASGD_ASSIGN_OR_RETURN(d_row_int_, DeviceBuffer<int32_t>::Create(batch));

    ASGD_ASSIGN_OR_RETURN(h_params_,
                          PinnedHostBuffer<float>::Create(num_params_));
    ASGD_ASSIGN_OR_RETURN(h_grad_,
                          PinnedHostBuffer<float>::Create(num_params_));
    ASGD_ASSIGN_OR_RETURN(
        h_inputs_, PinnedHostBuffer<float>::Create(batch * spec_.input_dim()));
    ASGD_ASSIGN_OR_RETURN(
        h_logits_, PinnedHostBuffer<float>::Create(batch * spec_.num_classes));
    ASGD_ASSIGN_OR_RETURN(h_labels_, PinnedHostBuffer<int32_t>::Create(batch));
    ASGD_ASSIGN_OR_RETURN(h_row_loss_, PinnedHostBuffer<float>::Create(batch));
    ASGD_ASSIGN_OR_RETURN(h_row_int_, PinnedHostBuffer<int32_t>::Create(batch));
    return absl::OkStatus();
  }

  // Best effort after an error: wait for whatever is still queued so that no
  // copy touches the staging buffers later, and clear a non-sticky error.
  void Drain() {
    if (copy_) cudaStreamSynchronize(copy_.get());
    if (compute_) cudaStreamSynchronize(compute_.get());
    cudaGetLastError();
  }

  // C [m, n] = op(A) op(B) in cuBLAS's column-major terms (the comments at
  // each call map them to the row-major matrices).
  absl::Status Gemm(cublasOperation_t op_a, cublasOperation_t op_b, int m,
                    int n, int k, const float* a, int lda, const float* b,
                    int ldb, float* c, int ldc) {
    const float alpha = 1.0f, beta = 0.0f;
    const cublasComputeType_t compute =
        options_.math == CudaOptions::MathMode::kTf32
            ? CUBLAS_COMPUTE_32F_FAST_TF32
            : CUBLAS_COMPUTE_32F;
    const cublasStatus_t status =
        cublasGemmEx(cublas_.get(), op_a, op_b, m, n, k, &alpha, a, CUDA_R_32F,
                     lda, b, CUDA_R_32F, ldb, &beta, c, CUDA_R_32F, ldc,
                     compute, CUBLAS_GEMM_DEFAULT);
    if (status != CUBLAS_STATUS_SUCCESS) {
      return CublasError(
          absl::StrCat("cublasGemmEx(m=", m, ", n=", n, ", k=", k, ")"),
          status);
    }
    return absl::OkStatus();
  }

  // Stages `count` floats of `src` at `offset` through the pinned buffer and
  // enqueues their upload to `dst` + offset on copy_.
  absl::Status Upload(const float* src, float* pinned, float* dst,
                      int64_t offset, int64_t count) {
    std::memcpy(pinned + offset, src + offset, count * sizeof(float));
    ASGD_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dst + offset, pinned + offset, count * sizeof(float),
                        cudaMemcpyHostToDevice, copy_.get()));
    return absl::OkStatus();
  }

  // Uploads the inputs (and labels, if not empty) and every layer's
  // parameters, and enqueues the forward pass, layer by layer, so that layer
  // l's GEMM can start while later layers are still being copied. On the
  // device, d_acts_[l] then holds layer l's activation for l < L and the
  // logits for l == L.
  absl::Status UploadAndForward(absl::Span<const float> params,
                                absl::Span<const float> inputs,
                                absl::Span<const int32_t> labels, int n) {
    const int64_t input_floats = int64_t{n} * spec_.input_dim();
    std::memcpy(h_inputs_.get(), inputs.data(), input_floats * sizeof(float));
    ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        d_inputs_.get(), h_inputs_.get(), input_floats * sizeof(float),
        cudaMemcpyHostToDevice, copy_.get()));
    if (!labels.empty()) {
      std::memcpy(h_labels_.get(), labels.data(), n * sizeof(int32_t));
      ASGD_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(d_labels_.get(), h_labels_.get(), n * sizeof(int32_t),
                          cudaMemcpyHostToDevice, copy_.get()));
    }

    const int last = num_layers() - 1;
    for (int l = 0; l <= last; ++l) {
      for (const Chunk& chunk : layer_chunks_[l]) {
        ASGD_RETURN_IF_ERROR(Upload(params.data(), h_params_.get(),
                                    d_params_.get(), chunk.offset,
                                    chunk.count));
      }
      ASGD_CUDA_RETURN_IF_ERROR(
          cudaEventRecord(params_ready_[l].get(), copy_.get()));
      ASGD_CUDA_RETURN_IF_ERROR(
          cudaStreamWaitEvent(compute_.get(), params_ready_[l].get(), 0));

      // Z [n, out] = A_prev [n, in] W^T, all row-major. Column-major, that is
      // Z^T [out, n] = W [out, in] A_prev^T [in, n], where the row-major W is
      // the column-major [in, out] matrix W^T (ld in), hence op T; A_prev is
      // the column-major [in, n] matrix A_prev^T (ld in), op N.
      const int in = layer_in(l), out = layer_out(l);
      const float* a_prev = l == 0 ? d_inputs_.get() : d_acts_[l - 1].get();
      float* z = d_acts_[l].get();
      ASGD_RETURN_IF_ERROR(Gemm(CUBLAS_OP_T, CUBLAS_OP_N, /*m=*/out, /*n=*/n,
                                /*k=*/in, d_params_.get() + weight_offset_[l],
                                /*lda=*/in, a_prev, /*ldb=*/in, z,
                                /*ldc=*/out));
      ASGD_CUDA_RETURN_IF_ERROR(cuda_kernels::LaunchBiasActivation(
          z, d_params_.get() + bias_offset_[l], n, out, layer_act(l),
          compute_.get()));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<BatchResult> RunGradient(absl::Span<const float> params,
                                          absl::Span<const float> inputs,
                                          absl::Span<const int32_t> labels,
                                          absl::Span<float> grad) {
    const int n = static_cast<int>(labels.size());
    const int last = num_layers() - 1;
    int labelled = 0;
    for (int32_t label : labels) labelled += label != kNoLabel;
    ASGD_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    ASGD_RETURN_IF_ERROR(UploadAndForward(params, inputs, labels, n));

    // dZ_L = (softmax - onehot) / labelled (0 on unlabelled rows), plus
    // per-row loss and hit.
    float* dz = d_delta_.get();
    float* da = d_delta_prev_.get();
    ASGD_CUDA_RETURN_IF_ERROR(cuda_kernels::LaunchSoftmaxCrossEntropy(
        d_acts_[last].get(), d_labels_.get(), n, spec_.num_classes,
        labelled > 0 ? 1.0f / labelled : 0.0f, dz, d_row_loss_.get(),
        d_row_int_.get(), compute_.get()));

    for (int l = last; l >= 0; --l) {
      const int in = layer_in(l), out = layer_out(l);
      const float* a_prev = l == 0 ? d_inputs_.get() : d_acts_[l - 1].get();
      // dW [out, in] = dZ^T [out, n] A_prev [n, in], row-major. Column-major:
      // dW^T [in, out] = A_prev^T [in, n] dZ [n, out], where A_prev^T is the
      // row-major A_prev read column-major (ld in, op N) and dZ is the
      // transpose of the row-major dZ read column-major (ld out, op T).
      ASGD_RETURN_IF_ERROR(Gemm(CUBLAS_OP_N, CUBLAS_OP_T, /*m=*/in, /*n=*/out,
                                /*k=*/n, a_prev, /*lda=*/in, dz, /*ldb=*/out,
                                d_grad_.get() + weight_offset_[l],
                                /*ldc=*/in));
      // db = column sums of dZ.
      ASGD_CUDA_RETURN_IF_ERROR(cuda_kernels::LaunchColumnSums(
          dz, n, out, d_grad_.get() + bias_offset_[l], compute_.get()));

      // Download this layer's gradient while the lower layers compute.
      ASGD_CUDA_RETURN_IF_ERROR(
          cudaEventRecord(grad_computed_[l].get(), compute_.get()));
      ASGD_CUDA_RETURN_IF_ERROR(
          cudaStreamWaitEvent(copy_.get(), grad_computed_[l].get(), 0));
      if (l == last) {  // the softmax results are ready too
        ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
            h_row_loss_.get(), d_row_loss_.get(), n * sizeof(float),
            cudaMemcpyDeviceToHost, copy_.get()));
        ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
            h_row_int_.get(), d_row_int_.get(), n * sizeof(int32_t),
            cudaMemcpyDeviceToHost, copy_.get()));
      }
      for (size_t c = 0; c < layer_chunks_[l].size(); ++c) {
        const Chunk& chunk = layer_chunks_[l][c];
        ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
            h_grad_.get() + chunk.offset, d_grad_.get() + chunk.offset,
            chunk.count * sizeof(float), cudaMemcpyDeviceToHost, copy_.get()));
        ASGD_CUDA_RETURN_IF_ERROR(
            cudaEventRecord(grad_downloaded_[l][c].get(), copy_.get()));
      }
      if (l == 0) break;

      // dA_prev [n, in] = dZ [n, out] W [out, in], row-major. Column-major:
      // dA_prev^T [in, n] = W^T [in, out] dZ^T [out, n]; both are the
      // row-major buffers read column-major (ld in and ld out), op N.
      ASGD_RETURN_IF_ERROR(Gemm(CUBLAS_OP_N, CUBLAS_OP_N, /*m=*/in, /*n=*/n,
                                /*k=*/out, d_params_.get() + weight_offset_[l],
                                /*lda=*/in, dz, /*ldb=*/out, da, /*ldc=*/in));
      ASGD_CUDA_RETURN_IF_ERROR(cuda_kernels::LaunchActivationBackward(
          da, a_prev, int64_t{n} * in, layer_act(l - 1), compute_.get()));
      std::swap(dz, da);
    }

    // Copy each chunk out of pinned memory as soon as it has arrived.
    for (int l = last; l >= 0; --l) {
      for (size_t c = 0; c < layer_chunks_[l].size(); ++c) {
        const Chunk& chunk = layer_chunks_[l][c];
        ASGD_CUDA_RETURN_IF_ERROR(
            cudaEventSynchronize(grad_downloaded_[l][c].get()));
        std::memcpy(grad.data() + chunk.offset, h_grad_.get() + chunk.offset,
                    chunk.count * sizeof(float));
      }
    }
    ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(copy_.get()));
    ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(compute_.get()));

    BatchResult result;
    result.labelled = labelled;
    for (int i = 0; i < n; ++i) {
      result.loss += h_row_loss_.get()[i];
      result.correct += h_row_int_.get()[i];
    }
    if (labelled > 0) result.loss /= labelled;
    return result;
  }

  absl::Status RunPredict(absl::Span<const float> params,
                          absl::Span<const float> inputs,
                          absl::Span<int32_t> out) {
    const int n = static_cast<int>(out.size());
    const int last = num_layers() - 1;
    ASGD_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    ASGD_RETURN_IF_ERROR(UploadAndForward(params, inputs, {}, n));
    ASGD_CUDA_RETURN_IF_ERROR(
        cuda_kernels::LaunchRowArgmax(d_acts_[last].get(), n, spec_.num_classes,
                                      d_row_int_.get(), compute_.get()));
    ASGD_CUDA_RETURN_IF_ERROR(
        cudaEventRecord(predicted_.get(), compute_.get()));
    ASGD_CUDA_RETURN_IF_ERROR(
        cudaStreamWaitEvent(copy_.get(), predicted_.get(), 0));
    ASGD_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(h_row_int_.get(), d_row_int_.get(), n * sizeof(int32_t),
                        cudaMemcpyDeviceToHost, copy_.get()));
    ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(copy_.get()));
    ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(compute_.get()));
    std::memcpy(out.data(), h_row_int_.get(), n * sizeof(int32_t));
    return absl::OkStatus();
  }

  // The logits of the forward pass, downloaded, then log-softmax per row on
  // the host (in double, like the CPU backend).
  absl::Status RunLogPosteriors(absl::Span<const float> params,
                                absl::Span<const float> inputs,
                                absl::Span<float> out) {
    const int c = spec_.num_classes;
    const int n = static_cast<int>(out.size() / c);
    const int last = num_layers() - 1;
    ASGD_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    ASGD_RETURN_IF_ERROR(UploadAndForward(params, inputs, {}, n));
    ASGD_CUDA_RETURN_IF_ERROR(
        cudaEventRecord(predicted_.get(), compute_.get()));
    ASGD_CUDA_RETURN_IF_ERROR(
        cudaStreamWaitEvent(copy_.get(), predicted_.get(), 0));
    ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        h_logits_.get(), d_acts_[last].get(), int64_t{n} * c * sizeof(float),
        cudaMemcpyDeviceToHost, copy_.get()));
    ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(copy_.get()));
    ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(compute_.get()));
    for (int i = 0; i < n; ++i) {
      const float* row = h_logits_.get() + int64_t{i} * c;
      float* o = out.data() + int64_t{i} * c;
      const float mx = *std::max_element(row, row + c);
      double sum = 0;
      for (int k = 0; k < c; ++k) sum += std::exp(double{row[k]} - mx);
      const float log_sum = static_cast<float>(std::log(sum)) + mx;
      for (int k = 0; k < c; ++k) o[k] = row[k] - log_sum;
    }
    return absl::OkStatus();
  }

  // Layers 0..num_layers()-1: the hidden dense layers, then the output
  // layer's affine part.
  int num_layers() const { return static_cast<int>(spec_.layers.size()) + 1; }
  int layer_in(int l) const { return LayerInputShape(spec_, l).dim(); }
  int layer_out(int l) const { return LayerOutputShape(spec_, l).dim(); }
  cuda_kernels::Act layer_act(int l) const {
    if (l >= static_cast<int>(spec_.layers.size())) {
      return cuda_kernels::Act::kIdentity;
    }
    switch (spec_.layers[l].dense.activation) {
      case Activation::kRelu:
        return cuda_kernels::Act::kRelu;
      case Activation::kSigmoid:
        return cuda_kernels::Act::kSigmoid;
      case Activation::kTanh:
        return cuda_kernels::Act::kTanh;
      case Activation::kNone:
        break;
    }
    return cuda_kernels::Act::kIdentity;
  }

  const ModelSpec spec_;
  const int max_batch_;
  const CudaOptions options_;
  const int64_t num_params_;
  std::vector<int64_t> weight_offset_, bias_offset_;
  std::vector<std::vector<Chunk>> layer_chunks_;  // [layer][chunk]

  // Declaration order matters for destruction (reverse): buffers, then
  // events, then the cuBLAS handle, then the streams it uses.
  Stream compute_, copy_;
  Cublas cublas_;
  std::vector<Event> params_ready_;                  // [layer], on copy_
  std::vector<Event> grad_computed_;                 // [layer], on compute_
  std::vector<std::vector<Event>> grad_downloaded_;  // [layer][chunk], copy_
  Event predicted_;                                  // on compute_

  DeviceBuffer<float> d_params_, d_grad_;       // [num_params]
  DeviceBuffer<float> d_inputs_;                // [max_batch, input_dim]
  DeviceBuffer<int32_t> d_labels_;              // [max_batch]
  std::vector<DeviceBuffer<float>> d_acts_;     // [layer][max_batch, out]
  DeviceBuffer<float> d_delta_, d_delta_prev_;  // [max_batch, widest]
  DeviceBuffer<float> d_row_loss_;              // [max_batch]
  DeviceBuffer<int32_t> d_row_int_;  // [max_batch]: hits or predictions

  PinnedHostBuffer<float> h_params_, h_grad_;
  PinnedHostBuffer<float> h_inputs_;
  PinnedHostBuffer<float> h_logits_;  // [max_batch, num_classes]
  PinnedHostBuffer<int32_t> h_labels_;
  PinnedHostBuffer<float> h_row_loss_;
  PinnedHostBuffer<int32_t> h_row_int_;
};

}  // namespace

absl::Status CudaDeviceStatus() { return DeviceCount().status(); }

bool CudaDeviceAvailable() { return CudaDeviceStatus().ok(); }

absl::StatusOr<std::string> CudaDeviceName(int device) {
  ASGD_RETURN_IF_ERROR(CheckDeviceOrdinal(device));
  cudaDeviceProp prop;
  ASGD_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
  return std::string(prop.name);
}

absl::StatusOr<std::unique_ptr<ModelBackend>> CreateCudaBackend(
    const ModelSpec& spec, int max_batch, const CudaOptions& options) {
  return CudaBackend::Create(spec, max_batch, options);
}

}  // namespace asgd
