// The convolutional layer on the CPU (LayerKind::kConv, see
// model/model_spec.h): each input row is `channels` feature maps of
// time × freq (channel-major); `filters` kernels of kernel_time ×
// kernel_freq over all input channels, stride 1, no padding, plus a bias per
// filter, the activation, then non-overlapping max-pooling of pool_time ×
// pool_freq (positions left over at the high end are dropped). Each output
// row is filters × T' × F', channel-major, with
//   T' = (time - kernel_time + 1) / pool_time,
//   F' = (freq - kernel_freq + 1) / pool_freq.
// Parameters: filter [filters, channels, kernel_time, kernel_freq] row-major,
// then bias [filters].
//
// Computation: rows are processed in blocks; each block is unrolled into a
// patch matrix (im2col: one row of channels × kernel_time × kernel_freq
// values per output position) and multiplied with the filters in one
// OpenBLAS sgemm. Backward recomputes the patches and uses two more GEMMs per
// block (filter gradient, patch gradient folded back into the input). The
// activations are monotone, so the layer pools before adding the bias and
// activating (the same result as the other order) and keeps only the
// position each pooled value came from for Backward.
//
// Thread-safety: as Layer.
#ifndef ASGD_MODEL_LAYERS_CONV_H_
#define ASGD_MODEL_LAYERS_CONV_H_

#include <cstdint>
#include <vector>

#include "model/layers/layer.h"

namespace asgd {

class ConvLayer final : public Layer {
 public:
  // `in` is the shape of an input row; `spec` must fit it (ValidateModelSpec
  // checks that). Scratch for max_rows rows. `block_rows` > 0 fixes the rows
  // per im2col block (tests use it to force several blocks); 0 picks it
  // from the sizes.
  ConvLayer(const FeatureShape& in, const ConvLayerSpec& spec, int max_rows,
            int block_rows = 0);

  FeatureShape in_shape() const override { return in_; }
  FeatureShape out_shape() const override { return out_; }

  void Forward(const float* params, const float* in, int sequences, int steps,
               float* out) override;
  void Backward(const float* params, const float* in, const float* out,
                const float* dout, int sequences, int steps, float* dparams,
                float* din) override;

  // Rows per im2col block (for benchmarks that time the same GEMMs).
  int block_rows() const { return block_rows_; }

 private:
  // The patches of rows [first, first + count) into cols_
  // ([count * positions, patch]).
  void Im2Col(const float* in, int first, int count);
  // Adds the patch gradients in cols_ back into rows [first, first + count)
  // of din (which the caller zeroed).
  void Col2ImAdd(int first, int count, float* din) const;

  const FeatureShape in_;
  const ConvLayerSpec spec_;
  const FeatureShape out_;
  const int conv_time_;  // time steps before pooling
  const int conv_freq_;  // frequency bins before pooling
  const int positions_;  // conv_time_ * conv_freq_
  const int patch_;      // channels * kernel_time * kernel_freq
  const int block_rows_;
  std::vector<float> cols_;       // [block_rows * positions, patch]
  std::vector<float> z_;          // [block_rows * positions, filters]
  std::vector<float> pooled_;     // [T', F', filters] of one row
  std::vector<int32_t> argmax_;   // [max_rows, T', F', filters]: position
  std::vector<float> dpool_;      // [out dim]: dout * act' of one row
};

}  // namespace asgd

#endif  // ASGD_MODEL_LAYERS_CONV_H_
