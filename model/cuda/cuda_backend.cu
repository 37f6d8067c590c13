#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "model/batch_check.h"
#include "model/cuda/cuda_backend.h"
#include "model/cuda/cuda_batch_stager.h"
#include "model/cuda/cuda_kernels.h"
#include "model/cuda/cuda_layer.h"
#include "model/cuda/cuda_mirrors.h"
#include "model/cuda/cuda_resident_model.h"
#include "model/cuda/cuda_soft_targets.h"
#include "model/cuda/cuda_util.h"

namespace asgd {
namespace {

using cuda::CheckCudaOptions;
using cuda::CreateEvent;
using cuda::CreateStream;
using cuda::Cublas;
using cuda::CudaLayer;
using cuda::DeviceBuffer;
using cuda::DeviceCount;
using cuda::Event;
using cuda::PinnedHostBuffer;
using cuda::Stream;

// Host<->device copies move in pieces of at most this many floats (4 MiB), so
// that the host's memcpy into pinned memory of one piece overlaps the DMA of
// the previous one.
constexpr int64_t kChunkFloats = int64_t{1} << 20;

// ---------------------------------------------------------------------------
// The backend: the layers of cuda_layer.h in order, as model/cpu_backend.cc
// runs those of model/layers/, then the softmax with cross-entropy.
//
// Streams: compute_ runs GEMMs and kernels; copy_ runs the parameters' and
// gradients' host<->device copies; the stager's own stream the minibatches'.
// Per call:
//   stager_:  inputs, labels (unless staged by the call before: see
//             cuda_batch_stager.h); compute_ waits for them
//   copy_:    layer 0 params                   -> params_ready_[0]
//             layer 1 params                   -> params_ready_[1] ...
//   compute_: wait params_ready_[l]; forward layer l   (l = 0..L)
//             softmax/loss; backward layer l -> grad_computed_[l] (l = L..0)
//   copy_:    wait grad_computed_[l]; download layer l's gradient in chunks,
//             each chunk -> its grad_downloaded_ event
//   host:     copies the announced next batch (StageNext) into the stager's
//             other slot and enqueues its upload; waits for each chunk's
//             event and copies it out of pinned memory while later layers are
//             still being computed and downloaded.
class CudaBackend final : public ModelBackend {
 public:
  static absl::StatusOr<std::unique_ptr<ModelBackend>> Create(
      const ModelSpec& spec, int max_batch, const CudaOptions& options) {
    ASGD_RETURN_IF_ERROR(ValidateModelSpec(spec));
    if (max_batch < 1) {
      return absl::InvalidArgumentError("max_rows must be at least 1");
    }
    ASGD_RETURN_IF_ERROR(CheckCudaOptions(options));
    std::unique_ptr<CudaBackend> backend(
        new CudaBackend(spec, max_batch, options));
    ASGD_RETURN_IF_ERROR(backend->Init());
    return std::unique_ptr<ModelBackend>(std::move(backend));
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
    ASGD_RETURN_IF_ERROR(CheckGradientCall(spec_, max_batch_, num_params_,
                                           params, batch, grad));
    absl::StatusOr<BatchResult> result = RunGradient(params, batch, grad);
    if (!result.ok()) Drain();
    return result;
  }

  absl::Status LogPosteriors(absl::Span<const float> params, const Batch& batch,
                             absl::Span<float> out) override {
    ASGD_RETURN_IF_ERROR(CheckOutputCall(spec_, max_batch_, num_params_,
                                         params, batch, out.size(),
                                         spec_.output_dim()));
    return Checked(RunLogPosteriors(params, batch, out));
  }

  absl::Status Predict(absl::Span<const float> params, const Batch& batch,
                       absl::Span<int32_t> out) override {
    ASGD_RETURN_IF_ERROR(CheckOutputCall(spec_, max_batch_, num_params_,
                                         params, batch, out.size(),
                                         spec_.output_frames));
    return Checked(RunPredict(params, batch, out));
  }

  // The resident model: in device memory (cuda_resident_model.h), created
  // by the first LoadModel.
  absl::Status LoadModel(absl::Span<const float> params) override {
    ASGD_RETURN_IF_ERROR(CheckModelSized("LoadModel", params.size()));
    ASGD_RETURN_IF_ERROR(EnsureResident());
    return Checked(resident_->Load(params));
  }

  absl::Status PinHostBuffer(absl::Span<const float> buffer) override {
    ASGD_RETURN_IF_ERROR(CheckModelSized("PinHostBuffer", buffer.size()));
    ASGD_RETURN_IF_ERROR(EnsureResident());
    return resident_->Pin(buffer);
  }

  void UnpinHostBuffer(absl::Span<const float> buffer) override {
    if (resident_ != nullptr) resident_->Unpin(buffer);
  }

  // Exact copies and the mirrors of pulled models (cuda_mirrors.h).
  absl::StatusOr<std::unique_ptr<ExactCopy>> CreateExactCopy(
      int64_t count) override {
    return cuda::CreateDeviceCopy(options_.device, count);
  }
  absl::Status MirrorFromCopy(absl::Span<float> buffer, int64_t begin,
                              const ExactCopy& copy) override {
    return mirrors_.Mirror(buffer, begin, copy);
  }
  absl::Status DownloadMirror(absl::Span<float> buffer, int64_t begin,
                              int64_t count) override {
    return mirrors_.Download(buffer, begin, count);
  }
  absl::Status LoadMirroredModel(absl::Span<const float> buffer) override {
    ASGD_RETURN_IF_ERROR(CheckModelSized("LoadMirroredModel", buffer.size()));
    ASGD_ASSIGN_OR_RETURN(const float* mirror, mirrors_.Find(buffer));
    ASGD_RETURN_IF_ERROR(EnsureResident());
    return Checked(resident_->LoadFromDevice(mirror));
  }

  absl::StatusOr<BatchResult> AccumulateGradient(const Batch& batch) override {
    if (resident_ == nullptr || !resident_->loaded()) {
      return absl::FailedPreconditionError(
          "AccumulateGradient before LoadModel: the backend holds no model");
    }
    // The checks read only the spans' sizes (these are device memory).
    ASGD_RETURN_IF_ERROR(CheckGradientCall(
        spec_, max_batch_, num_params_,
        absl::Span<const float>(resident_->model(), num_params_), batch,
        absl::Span<float>(d_grad_.get(), num_params_)));
    absl::StatusOr<BatchResult> result =
        RunGradient({}, batch, {}, resident_->model());
    if (!result.ok()) {
      Drain();
      return result;
    }
    absl::StatusOr<bool> finite = resident_->Accumulate(d_grad_.get());
    if (!finite.ok()) return Checked(finite.status());
    result->gradient_finite = *finite;
    return result;
  }

  int accumulated() const override {
    return resident_ == nullptr ? 0 : resident_->accumulated();
  }

  // The next minibatch moves while this one computes (cuda_batch_stager.h).
  bool stages_batches() const override { return true; }
  void StageNext(const Batch& next) override { stager_.Announce(next); }

  absl::Status TakeAverage(absl::Span<float> out) override {
    ASGD_RETURN_IF_ERROR(CheckModelSized("TakeAverage", out.size()));
    ASGD_RETURN_IF_ERROR(NeedResident("TakeAverage"));
    return Checked(resident_->TakeAverage(d_grad_.get(), out));
  }

  absl::Status TakeBf16(absl::Span<uint16_t> out) override {
    ASGD_RETURN_IF_ERROR(CheckModelSized("TakeBf16", out.size()));
    ASGD_RETURN_IF_ERROR(NeedResident("TakeBf16"));
    return Checked(resident_->TakeBf16(d_grad_.get(), out));
  }

  absl::Status TakeOneBit(const OneBitPlan& plan,
                          absl::Span<char> out) override {
    ASGD_RETURN_IF_ERROR(CheckOneBitCall(plan, num_params_, out.size()));
    ASGD_RETURN_IF_ERROR(NeedResident("TakeOneBit"));
    return Checked(resident_->TakeOneBit(plan, d_grad_.get(), out));
  }

  absl::Status TakeTopK(const TopKPlan& plan,
                        std::vector<std::string>* out) override {
    ASGD_RETURN_IF_ERROR(plan.Validate(num_params_));
    ASGD_RETURN_IF_ERROR(NeedResident("TakeTopK"));
    return Checked(resident_->TakeTopK(plan, d_grad_.get(), out));
  }

  absl::Status RestoreResidual(int64_t flat_begin,
                               absl::Span<const float> values) override {
    ASGD_RETURN_IF_ERROR(
        CheckResidualRange(flat_begin, values.size(), num_params_));
    ASGD_RETURN_IF_ERROR(NeedResident("RestoreResidual"));
    return Checked(
        resident_->RestoreResidual(flat_begin, values, d_grad_.get()));
  }

  absl::Status ReadResidual(absl::Span<float> out) override {
    ASGD_RETURN_IF_ERROR(CheckModelSized("ReadResidual", out.size()));
    ASGD_RETURN_IF_ERROR(NeedResident("ReadResidual"));
    return Checked(resident_->ReadResidual(out));
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
        num_params_(ModelParamCount(spec)),
        mirrors_(options.device, num_params_) {
    // Layer l's parameters are one contiguous slice of the flat vector.
    for (int l = 0; l < num_layers(); ++l) {
      const int64_t begin = LayerParamOffset(spec, l);
      const int64_t end = begin + LayerParamCount(spec, l);
      offsets_.push_back(begin);
      std::vector<Chunk> chunks;
      for (int64_t c = begin; c < end; c += kChunkFloats) {
        chunks.push_back({c, std::min(kChunkFloats, end - c)});
      }
      layer_chunks_.push_back(std::move(chunks));
    }
  }

  // Allocates everything; called once by Create().
  absl::Status Init() {
    ASGD_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    ASGD_ASSIGN_OR_RETURN(compute_, CreateStream());
    ASGD_ASSIGN_OR_RETURN(copy_, CreateStream());
    ASGD_ASSIGN_OR_RETURN(cublas_,
                          cuda::CreateCublas(compute_.get(), options_.math));
    ctx_.stream = compute_.get();
    ctx_.cublas = cublas_.get();
    ctx_.math = options_.math;

    const int layers = num_layers();
    for (int l = 0; l < layers; ++l) {
      ASGD_ASSIGN_OR_RETURN(
          std::unique_ptr<CudaLayer> layer,
          cuda::CreateCudaLayer(spec_, l, max_batch_, options_));
      layers_.push_back(std::move(layer));
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
    // Heads: one softmax of num_classes per row and output frame.
    const int64_t heads = batch * spec_.output_frames;
    int64_t widest = spec_.input_dim();
    for (int l = 0; l < layers; ++l) {
      widest = std::max<int64_t>(widest, layers_[l]->out_shape().dim());
    }
    ASGD_ASSIGN_OR_RETURN(d_params_, DeviceBuffer<float>::Create(num_params_));
    ASGD_ASSIGN_OR_RETURN(d_grad_, DeviceBuffer<float>::Create(num_params_));
    ASGD_ASSIGN_OR_RETURN(stager_, cuda::BatchStager::Create(
                                       batch, spec_.input_dim(), heads));
    for (int l = 0; l < layers; ++l) {
      ASGD_ASSIGN_OR_RETURN(
          DeviceBuffer<float> acts,
          DeviceBuffer<float>::Create(batch * layers_[l]->out_shape().dim()));
      d_acts_.push_back(std::move(acts));
    }
    ASGD_ASSIGN_OR_RETURN(d_delta_,
                          DeviceBuffer<float>::Create(batch * widest));
    ASGD_ASSIGN_OR_RETURN(d_delta_prev_,
                          DeviceBuffer<float>::Create(batch * widest));
    ASGD_ASSIGN_OR_RETURN(d_row_loss_, DeviceBuffer<float>::Create(heads));
    ASGD_ASSIGN_OR_RETURN(d_row_int_, DeviceBuffer<int32_t>::Create(heads));

    ASGD_ASSIGN_OR_RETURN(
        h_logits_, PinnedHostBuffer<float>::Create(heads * spec_.num_classes));
    ASGD_ASSIGN_OR_RETURN(h_row_loss_, PinnedHostBuffer<float>::Create(heads));
    ASGD_ASSIGN_OR_RETURN(h_row_int_, PinnedHostBuffer<int32_t>::Create(heads));
    return absl::OkStatus();
  }

  absl::Status CheckModelSized(const char* call, size_t size) const {
    return asgd::CheckModelSized(call, size, num_params_);
  }

  absl::Status EnsureResident() {
    ASGD_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    if (resident_ != nullptr) return absl::OkStatus();
    ASGD_ASSIGN_OR_RETURN(resident_, cuda::ResidentModel::Create(
                                         num_params_, compute_.get()));
    return absl::OkStatus();
  }

  // The resident model's buffers exist from the first LoadModel on.
  absl::Status NeedResident(const char* call) {
    if (resident_ == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat(call, " before LoadModel: the backend holds no model"));
    }
    ASGD_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    return absl::OkStatus();
  }

  absl::Status Checked(absl::Status status) {
    if (!status.ok()) Drain();
    return status;
  }

  // Best effort after an error: wait for whatever is still queued so that no
  // copy touches the staging buffers later, and clear a non-sticky error.
  void Drain() {
    if (copy_) cudaStreamSynchronize(copy_.get());
    if (compute_) cudaStreamSynchronize(compute_.get());
    stager_.Drain();
    cudaGetLastError();
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

  // The input of layer l on the device.
  const float* LayerInput(int l) const {
    return l == 0 ? inputs_ : d_acts_[l - 1].get();
  }

  // Makes the inputs (and labels, if `with_labels`) ready on the device
  // (inputs_, labels_: staged, or uploaded now), uploads every layer's
  // parameters, and enqueues the forward pass, layer by layer, so that layer
  // l can start while later layers' parameters are still being copied. On
  // the device, d_acts_[l] then holds layer l's output for l < L and the
  // logits for l == L.
  // With `resident`, the parameters are that device copy instead: nothing
  // of them is uploaded.
  absl::Status UploadAndForward(absl::Span<const float> params,
                                const Batch& batch, bool with_labels,
                                const float* resident = nullptr) {
    if (resident == nullptr && h_params_.get() == nullptr) {  // first use
      ASGD_ASSIGN_OR_RETURN(h_params_,
                            PinnedHostBuffer<float>::Create(num_params_));
    }
    ASGD_ASSIGN_OR_RETURN(
        const cuda::BatchStager::Slot slot,
        stager_.Acquire(batch, with_labels, compute_.get()));
    inputs_ = slot.inputs;
    labels_ = slot.labels;  // one per head
    const float* model = resident != nullptr ? resident : d_params_.get();
    for (int l = 0; l < num_layers(); ++l) {
      if (resident == nullptr) {
        for (const Chunk& chunk : layer_chunks_[l]) {
          ASGD_RETURN_IF_ERROR(Upload(params.data(), h_params_.get(),
                                      d_params_.get(), chunk.offset,
                                      chunk.count));
        }
        ASGD_CUDA_RETURN_IF_ERROR(
            cudaEventRecord(params_ready_[l].get(), copy_.get()));
        ASGD_CUDA_RETURN_IF_ERROR(
            cudaStreamWaitEvent(compute_.get(), params_ready_[l].get(), 0));
      }
      ASGD_RETURN_IF_ERROR(layers_[l]->Forward(ctx_, model + offsets_[l],
                                               LayerInput(l), batch.sequences,
                                               batch.steps, d_acts_[l].get()));
    }
    return absl::OkStatus();
  }

  // The gradient into d_grad_ and, unless `resident` (the device copy to
  // compute from), downloaded into `grad`.
  absl::StatusOr<BatchResult> RunGradient(absl::Span<const float> params,
                                          const Batch& batch,
                                          absl::Span<float> grad,
                                          const float* resident = nullptr) {
    const int n = batch.rows() * spec_.output_frames;  // heads of the loss
    const int last = num_layers() - 1;
    int labelled = 0;
    for (int32_t label : batch.labels) labelled += label != kNoLabel;
    ASGD_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    if (resident == nullptr && h_grad_.get() == nullptr) {  // first use
      ASGD_ASSIGN_OR_RETURN(h_grad_,
                            PinnedHostBuffer<float>::Create(num_params_));
    }
    ASGD_RETURN_IF_ERROR(UploadAndForward(params, batch, true, resident));
    const float* model = resident != nullptr ? resident : d_params_.get();

    // dZ_L = (softmax - onehot) / labelled (0 on unlabelled rows), plus
    // per-row loss and hit.
    float* dout = d_delta_.get();
    float* din = d_delta_prev_.get();
    const float inv = labelled > 0 ? 1.0f / labelled : 0.0f;
    ASGD_CUDA_RETURN_IF_ERROR(cuda_kernels::LaunchSoftmaxCrossEntropy(
        d_acts_[last].get(), labels_, n, spec_.num_classes, inv, dout,
        d_row_loss_.get(), d_row_int_.get(), compute_.get()));
    if (!batch.teacher.empty()) {  // teacher-student: cuda_soft_targets.h
      ASGD_RETURN_IF_ERROR(soft_targets_.Run(
          ctx_, batch, n, max_batch_ * spec_.output_frames, spec_.num_classes,
          d_acts_[last].get(), labels_, inv, dout, d_row_loss_.get()));
    }

    for (int l = last; l >= 0; --l) {
      // The output layer's "out" is the softmax's input; its activation is
      // none, so Backward does not read it.
      ASGD_RETURN_IF_ERROR(layers_[l]->Backward(
          ctx_, model + offsets_[l], LayerInput(l), d_acts_[l].get(),
          dout, batch.sequences, batch.steps, d_grad_.get() + offsets_[l],
          l == 0 ? nullptr : din));

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
      for (size_t c = 0; resident == nullptr && c < layer_chunks_[l].size();
           ++c) {
        const Chunk& chunk = layer_chunks_[l][c];
        ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
            h_grad_.get() + chunk.offset, d_grad_.get() + chunk.offset,
            chunk.count * sizeof(float), cudaMemcpyDeviceToHost, copy_.get()));
        ASGD_CUDA_RETURN_IF_ERROR(
            cudaEventRecord(grad_downloaded_[l][c].get(), copy_.get()));
      }
      std::swap(dout, din);
    }
    // While the device computes: the next minibatch, if one was announced.
    ASGD_RETURN_IF_ERROR(stager_.StageAnnounced());

    // Copy each chunk out of pinned memory as soon as it has arrived.
    for (int l = last; resident == nullptr && l >= 0; --l) {
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
    ASGD_RETURN_IF_ERROR(stager_.Finish());

    BatchResult result;
    result.labelled = labelled;
    for (int i = 0; i < n; ++i) {
      result.loss += h_row_loss_.get()[i];
      result.correct += h_row_int_.get()[i];
    }
    if (labelled > 0) result.loss /= labelled;
    return result;
  }

  absl::Status RunPredict(absl::Span<const float> params, const Batch& batch,
                          absl::Span<int32_t> out) {
    const int n = batch.rows() * spec_.output_frames;  // heads
    const int last = num_layers() - 1;
    ASGD_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    ASGD_RETURN_IF_ERROR(UploadAndForward(params, batch, false));
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
                                const Batch& batch, absl::Span<float> out) {
    const int c = spec_.num_classes;
    const int n = batch.rows() * spec_.output_frames;  // heads
    const int last = num_layers() - 1;
    ASGD_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    ASGD_RETURN_IF_ERROR(UploadAndForward(params, batch, false));
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
      LogSoftmaxRow(h_logits_.get() + int64_t{i} * c, c,
                    out.data() + int64_t{i} * c);
    }
    return absl::OkStatus();
  }

  // Layers 0..num_layers()-1: the hidden layers, then the output layer's
  // affine part.
  int num_layers() const { return static_cast<int>(spec_.layers.size()) + 1; }

  const ModelSpec spec_;
  const int max_batch_;
  const CudaOptions options_;
  const int64_t num_params_;
  std::vector<int64_t> offsets_;                  // of each layer's params
  std::vector<std::vector<Chunk>> layer_chunks_;  // [layer][chunk]

  // Declaration order matters for destruction (reverse): buffers and layers,
  // then events, then the cuBLAS handle, then the streams it uses.
  Stream compute_, copy_;
  Cublas cublas_;
  cuda::Context ctx_;                 // compute_ and cublas_, for the layers
  std::vector<Event> params_ready_;   // [layer], on copy_
  std::vector<Event> grad_computed_;  // [layer], on compute_
  std::vector<std::vector<Event>> grad_downloaded_;  // [layer][chunk], copy_
  Event predicted_;                                  // on compute_

  std::vector<std::unique_ptr<CudaLayer>> layers_;  // hidden, then output
  DeviceBuffer<float> d_params_, d_grad_;           // [num_params]
  cuda::BatchStager stager_;  // the minibatches' inputs and labels
  // Where the current call's batch is (in one of stager_'s slots).
  const float* inputs_ = nullptr;
  const int32_t* labels_ = nullptr;
  std::vector<DeviceBuffer<float>> d_acts_;         // [layer][max_batch, out]
  DeviceBuffer<float> d_delta_, d_delta_prev_;      // [max_batch, widest]
  DeviceBuffer<float> d_row_loss_;                  // [heads]
  DeviceBuffer<int32_t> d_row_int_;  // [heads]: hits or predictions
  cuda::SoftTargetPass soft_targets_;  // taught batches

  // Model-sized: made by the first call with host parameters (gradients).
  PinnedHostBuffer<float> h_params_, h_grad_;
  PinnedHostBuffer<float> h_logits_;  // [heads, num_classes]
  PinnedHostBuffer<float> h_row_loss_;
  PinnedHostBuffer<int32_t> h_row_int_;

  std::unique_ptr<cuda::ResidentModel> resident_;  // from the first LoadModel
  cuda::ModelMirrors mirrors_;  // any thread (MirrorFromCopy)
};

}  // namespace

absl::StatusOr<std::unique_ptr<ModelBackend>> CreateCudaBackend(
    const ModelSpec& spec, int max_batch, const CudaOptions& options) {
  return CudaBackend::Create(spec, max_batch, options);
}

}  // namespace asgd
