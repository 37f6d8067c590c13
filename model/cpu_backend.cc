#include "model/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/batch_check.h"
#include "model/layers/layer.h"

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
    const bool taught = !batch.teacher.empty();
    if (taught) SoftTargets(batch);  // from the logits
    // A multi-frame model's logits [rows, k * c] are rows * k heads of c
    // classes each, in the order of the labels: every head is a row here.
    const int n = batch.rows() * spec_.output_frames;
    const int c = spec_.num_classes;
    Softmax(n);
    // Softmax output: loss, accuracy, and dZ = (p - onehot) / labelled,
    // zero on unlabelled heads (with a teacher, see Batch).
    const float* probs = acts_.back().data();
    BatchResult result;
    for (int i = 0; i < n; ++i) result.labelled += batch.labels[i] != kNoLabel;
    float* dz = delta_.data();
    const float inv = result.labelled > 0 ? 1.0f / result.labelled : 0.0f;
    for (int i = 0; i < n; ++i) {
      const float* p = probs + int64_t{i} * c;
      float* d = dz + int64_t{i} * c;
      const int32_t label = batch.labels[i];
      if (label == kNoLabel) {
        std::fill(d, d + c, 0.0f);
        continue;
      }
      result.correct += (std::max_element(p, p + c) - p) == label;
      const double hard = -std::log(std::max(p[label], 1e-30f));
      if (!taught) {
        result.loss += hard;
        for (int k = 0; k < c; ++k) d[k] = (p[k] - (k == label ? 1.0f : 0.0f)) * inv;
        continue;
      }
      const float w = batch.teacher_weight;
      const float t = batch.temperature;
      const float* pt = soft_.data() + int64_t{i} * 2 * c;  // p_T, then q_T
      const float* qt = pt + c;
      double kl = 0;
      for (int k = 0; k < c; ++k) {
        if (qt[k] > 0.0f) {
          kl += qt[k] * (std::log(double{qt[k]}) -
                         std::log(std::max(double{pt[k]}, 1e-30)));
        }
        d[k] = ((1.0f - w) * (p[k] - (k == label ? 1.0f : 0.0f)) +
                w * t * (pt[k] - qt[k])) * inv;
      }
      result.loss += (1.0 - w) * hard + double{w} * t * t * kl;
    }
    if (result.labelled > 0) result.loss /= result.labelled;

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

  // The softmax of the first `rows` rows of num_classes logits, in place.
  void Softmax(int rows) {
    const int c = spec_.num_classes;
    float* z = acts_.back().data();
    for (int i = 0; i < rows; ++i) SoftmaxRow(z + int64_t{i} * c, c, 1.0f);
  }

  // Per head of a taught batch, from the logits: p_T = softmax(z / T) and
  // q_T = softmax(teacher / T), side by side in soft_.
  void SoftTargets(const Batch& batch) {
    const int c = spec_.num_classes;
    const int heads = batch.rows() * spec_.output_frames;
    soft_.resize(int64_t{heads} * 2 * c);
    const float* z = acts_.back().data();
    for (int i = 0; i < heads; ++i) {
      float* pt = soft_.data() + int64_t{i} * 2 * c;
      std::copy_n(z + int64_t{i} * c, c, pt);
      std::copy_n(batch.teacher.data() + int64_t{i} * c, c, pt + c);
      SoftmaxRow(pt, c, batch.temperature);
      SoftmaxRow(pt + c, c, batch.temperature);
    }
  }

  // row = softmax(row / t).
  static void SoftmaxRow(float* row, int c, float t) {
    const float mx = *std::max_element(row, row + c);
    float sum = 0.0f;
    if (t == 1.0f) {
      for (int k = 0; k < c; ++k) sum += (row[k] = std::exp(row[k] - mx));
    } else {
      for (int k = 0; k < c; ++k) sum += (row[k] = std::exp((row[k] - mx) / t));
    }
    for (int k = 0; k < c; ++k) row[k] /= sum;
  }

  const ModelSpec spec_;
  const int max_rows_;
  const int64_t num_params_;
  std::vector<std::unique_ptr<Layer>> layers_;  // hidden layers, then output
  std::vector<int64_t> offsets_;                // of each layer's parameters
  std::vector<std::vector<float>> acts_;        // per layer [max_rows, out]
  std::vector<float> delta_, delta_prev_;
  std::vector<float> soft_;  // a taught batch's p_T and q_T per row
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
