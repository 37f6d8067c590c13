#include "model/layer_range.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace asgd {

absl::StatusOr<std::unique_ptr<LayerRange>> LayerRange::Create(
    const ModelSpec& spec, int first, int last, int max_rows) {
  ASGD_RETURN_IF_ERROR(ValidateModelSpec(spec));
  const int total = static_cast<int>(spec.layers.size()) + 1;
  if (first < 0 || last > total || first >= last) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer range [", first, ", ", last,
                     ") is empty or outside the model's ", total, " layers"));
  }
  if (max_rows < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_rows must be >= 1, got ", max_rows));
  }
  std::vector<std::unique_ptr<Layer>> layers;
  for (int i = first; i < last; ++i) {
    ASGD_ASSIGN_OR_RETURN(std::unique_ptr<Layer> layer,
                          CreateLayer(spec, i, max_rows));
    layers.push_back(std::move(layer));
  }
  return std::unique_ptr<LayerRange>(
      new LayerRange(spec, first, last, max_rows, std::move(layers)));
}

LayerRange::LayerRange(const ModelSpec& spec, int first, int last,
                       int max_rows, std::vector<std::unique_ptr<Layer>> layers)
    : first_(first),
      last_(last),
      has_loss_(last == static_cast<int>(spec.layers.size()) + 1),
      layers_(std::move(layers)),
      loss_(spec) {
  param_offset_ = LayerParamOffset(spec, first);
  int widest = layers_.front()->in_shape().dim();
  for (int i = first; i < last; ++i) {
    offsets_.push_back(LayerParamOffset(spec, i) - param_offset_);
    param_count_ += LayerParamCount(spec, i);
    const int dim = layers_[i - first]->out_shape().dim();
    acts_.emplace_back(int64_t{max_rows} * dim);
    widest = std::max(widest, dim);
  }
  delta_.resize(int64_t{max_rows} * widest);
  delta_prev_.resize(delta_.size());
}

void LayerRange::Forward(const float* params, const float* in, int sequences,
                         int steps) {
  for (size_t l = 0; l < layers_.size(); ++l) {
    const float* x = l == 0 ? in : acts_[l - 1].data();
    layers_[l]->Forward(params + offsets_[l], x, sequences, steps,
                        acts_[l].data());
  }
}

BatchResult LayerRange::Loss(const Batch& batch) {
  return loss_.Compute(batch, acts_.back().data(), delta_.data());
}

void LayerRange::Backward(const float* params, const float* in,
                          const float* dout, int sequences, int steps,
                          float* dparams, float* din) {
  const int64_t rows = int64_t{sequences} * steps;
  if (dout != nullptr) std::copy_n(dout, rows * out_dim(), delta_.data());
  for (int l = static_cast<int>(layers_.size()) - 1; l >= 0; --l) {
    const float* x = l == 0 ? in : acts_[l - 1].data();
    float* dx = l == 0 ? din : delta_prev_.data();
    layers_[l]->Backward(params + offsets_[l], x, acts_[l].data(),
                         delta_.data(), sequences, steps,
                         dparams + offsets_[l], dx);
    std::swap(delta_, delta_prev_);
  }
}

}  // namespace asgd
