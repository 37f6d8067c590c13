// The dense layer on the CPU: y = act(x W^T + b) per row, with W
// [units, in] and b [units] (OpenBLAS sgemm). Also the output layer's affine
// part (activation none). See layer.h for the contract.
//
// Thread-safety: as Layer.
#ifndef ASGD_MODEL_LAYERS_DENSE_H_
#define ASGD_MODEL_LAYERS_DENSE_H_

#include <memory>
#include <vector>

#include "model/layers/layer.h"

namespace asgd {

class DenseLayer final : public Layer {
 public:
  // `in_dim` inputs per row, `units` outputs; scratch for max_rows rows.
  DenseLayer(int in_dim, int units, Activation activation, int max_rows);

  FeatureShape in_shape() const override { return {1, 1, in_dim_}; }
  FeatureShape out_shape() const override { return {1, 1, units_}; }

  void Forward(const float* params, const float* in, int sequences, int steps,
               float* out) override;
  void Backward(const float* params, const float* in, const float* out,
                const float* dout, int sequences, int steps, float* dparams,
                float* din) override;

 private:
  const int in_dim_;
  const int units_;
  const Activation activation_;
  std::vector<float> dz_;  // [max_rows, units]
};

}  // namespace asgd

#endif  // ASGD_MODEL_LAYERS_DENSE_H_
