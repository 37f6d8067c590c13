#include "model/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/batch_check.h"
#include "model/layers/layer.h"
#include "model/softmax_loss.h"

extern "C" void openblas_set_num_threads(int num_threads);

namespace asgd {

void SetBlasThreads(int threads) { openblas_set_num_threads(threads); }

namespace {

class CpuBackend final : public ModelBackend {
 public:
  CpuBackend(const ModelSpec& spec, int max_rows,
             std::vector<std::unique_ptr<Layer>> layers)
      : spec_(spec),
        max_rows_(max_rows),
        num_params_(ModelParamCount(spec)),
        layers_(std::move(layers)) {
    int widest = spec.input_dim();
    for (size_t i = 0; i < layers_.size(); ++i) {
      offsets_.push_back(LayerParamOffset(spec, static_cast<int>(i)));
      const int dim = layers_[i]->out_shape().dim();
      acts_.emplace_back(int64_t{max_rows} * dim);
      widest = std::max(widest, dim);
    }
    delta_.resize(int64_t{max_rows} * widest);
    delta_prev_.resize(delta_.size());
  }

  absl::string_view name() const override { return "cpu"; }
  const ModelSpec& spec() const override { return spec_; }
  int max_rows() const override { return max_rows_; }

  absl::StatusOr<BatchResult> ComputeGradient(absl::Span<const float> params,
                                              const Batch& batch,
                                              absl::Span<float> grad) override {
    ASGD_RETURN_IF_ERROR(CheckGradientCall(spec_, max_rows_, num_params_,
                                           params, batch, grad));
    ForwardLogits(params.data(), batch);
    const BatchResult result =
        loss_.Compute(batch, acts_.back().data(), delta_.data());

    for (int l = static_cast<int>(layers_.size()) - 1; l >= 0; --l) {
      const float* in = l == 0 ? batch.inputs.data() : acts_[l - 1].data();
      // The output layer's "out" is the softmax's input; its activation is
      // none, so Backward does not read it.
      layers_[l]->Backward(params.data() + offsets_[l], in, acts_[l].data(),
                           delta_.data(), batch.sequences, batch.steps,
                           grad.data() + offsets_[l],
                           l == 0 ? nullptr : delta_prev_.data());
      std::swap(delta_, delta_prev_);
    }
    return result;
  }

  absl::Status LogPosteriors(absl::Span<const float> params,
                             const Batch& batch,
                             absl::Span<float> out) override {
    ASGD_RETURN_IF_ERROR(CheckOutputCall(spec_, max_rows_, num_params_, params,
                                         batch, out.size(), spec_.output_dim()));
    ForwardLogits(params.data(), batch);
    const int c = spec_.num_classes;
    const float* z = acts_.back().data();
    for (int i = 0; i < batch.rows() * spec_.output_frames; ++i) {
      LogSoftmaxRow(z + int64_t{i} * c, c, out.data() + int64_t{i} * c);
    }
    return absl::OkStatus();
  }

  absl::Status Predict(absl::Span<const float> params, const Batch& batch,
                       absl::Span<int32_t> out) override {
    ASGD_RETURN_IF_ERROR(CheckOutputCall(spec_, max_rows_, num_params_, params,
                                         batch, out.size(),
                                         spec_.output_frames));
    ForwardLogits(params.data(), batch);
    const int c = spec_.num_classes;
    const float* z = acts_.back().data();
    for (int i = 0; i < batch.rows() * spec_.output_frames; ++i) {
      const float* row = z + int64_t{i} * c;
      out[i] = static_cast<int32_t>(std::max_element(row, row + c) - row);
    }
    return absl::OkStatus();
  }

 private:
  // Every layer's output; the last holds the logits.
  void ForwardLogits(const float* params, const Batch& batch) {
    for (size_t l = 0; l < layers_.size(); ++l) {
      const float* in = l == 0 ? batch.inputs.data() : acts_[l - 1].data();
      layers_[l]->Forward(params + offsets_[l], in, batch.sequences,
                          batch.steps, acts_[l].data());
    }
  }

  const ModelSpec spec_;
  const int max_rows_;
  const int64_t num_params_;
  std::vector<std::unique_ptr<Layer>> layers_;  // hidden layers, then output
  std::vector<int64_t> offsets_;                // of each layer's parameters
  std::vector<std::vector<float>> acts_;        // per layer [max_rows, out]
  std::vector<float> delta_, delta_prev_;
  SoftmaxLoss loss_{spec_};
};

}  // namespace

absl::StatusOr<std::unique_ptr<ModelBackend>> CreateCpuBackend(
    const ModelSpec& spec, int max_rows) {
  ASGD_RETURN_IF_ERROR(ValidateModelSpec(spec));
  if (max_rows < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_rows must be >= 1, got ", max_rows));
  }
  std::vector<std::unique_ptr<Layer>> layers;
  for (int i = 0; i <= static_cast<int>(spec.layers.size()); ++i) {
    ASGD_ASSIGN_OR_RETURN(std::unique_ptr<Layer> layer,
                          CreateLayer(spec, i, max_rows));
    layers.push_back(std::move(layer));
  }
  return std::unique_ptr<ModelBackend>(
      new CpuBackend(spec, max_rows, std::move(layers)));
}

}  // namespace asgd
