#include "model/cpu_layer_range.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "model/layers/layer.h"
#include "model/softmax_loss.h"

namespace asgd {
namespace {

// The CPU's LayerRange: the CPU layers (model/layers/) in order, with the
// activations of one minibatch in host memory.
class CpuLayerRange final : public LayerRange {
 public:
  CpuLayerRange(const ModelSpec& spec, int first, int last, int max_rows,
                std::vector<std::unique_ptr<Layer>> layers)
      : LayerRange(spec, first, last),
        layers_(std::move(layers)),
        loss_(spec) {
    int widest = in_dim();
    for (int i = first; i < last; ++i) {
      offsets_.push_back(LayerParamOffset(spec, i) - param_offset());
      const int dim = layers_[i - first]->out_shape().dim();
      acts_.emplace_back(int64_t{max_rows} * dim);
      widest = std::max(widest, dim);
    }
    delta_.resize(int64_t{max_rows} * widest);
    delta_prev_.resize(delta_.size());
  }

  absl::Status Forward(const float* params, const float* in, int sequences,
                       int steps) override {
    for (size_t l = 0; l < layers_.size(); ++l) {
      const float* x = l == 0 ? in : acts_[l - 1].data();
      layers_[l]->Forward(params + offsets_[l], x, sequences, steps,
                          acts_[l].data());
    }
    return absl::OkStatus();
  }

  const float* out() const override { return acts_.back().data(); }

  BatchResult Loss(const Batch& batch) override {
    return loss_.Compute(batch, acts_.back().data(), delta_.data());
  }

  absl::Status Backward(const float* params, const float* in,
                        const float* dout, int sequences, int steps,
                        float* dparams, float* din) override {
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
    return absl::OkStatus();
  }

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<int64_t> offsets_;          // of each layer, within the range
  std::vector<std::vector<float>> acts_;  // per layer [max_rows, out]
  std::vector<float> delta_, delta_prev_;
  SoftmaxLoss loss_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<LayerRange>> CreateCpuLayerRange(
    const ModelSpec& spec, int first, int last, int max_rows) {
  ASGD_RETURN_IF_ERROR(CheckLayerRange(spec, first, last, max_rows));
  std::vector<std::unique_ptr<Layer>> layers;
  for (int i = first; i < last; ++i) {
    ASGD_ASSIGN_OR_RETURN(std::unique_ptr<Layer> layer,
                          CreateLayer(spec, i, max_rows));
    layers.push_back(std::move(layer));
  }
  return std::unique_ptr<LayerRange>(
      new CpuLayerRange(spec, first, last, max_rows, std::move(layers)));
}

}  // namespace asgd
