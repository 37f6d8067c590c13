// The LSTM layer on the CPU (LayerKind::kLstm, see model/model_spec.h), one
// direction or two.
//
// Per direction, over the steps of each sequence (the forward direction from
// step 0 up, the backward one from the last step down), from a zero state:
//   [i f g o] = W_x x_t + W_r r_prev + bias    (gate blocks of `cells`)
//   i, f, o = sigmoid(.), g = tanh(.)
//   c_t = f * c_prev + i * g, clipped to ±cell_clip when cell_clip > 0
//   h_t = o * tanh(c_t)
//   r_t = W_p h_t with a projection, else h_t: the output and next r_prev.
// The gradient through the clip is zero where it clipped. A bidirectional
// layer's output row is [r_fw, r_bw]. Parameters per direction: w_x
// [4*cells, in], w_r [4*cells, rec], bias [4*cells], then w_p
// [projection, cells] when projected (rec = projection or cells); the
// forward direction's, then the backward one's.
//
// Computation: rows are time-major, so one step of all sequences is a
// contiguous block of rows. The input part of the gates is one sgemm over
// all rows; each step adds one sgemm for the recurrent part (and one for the
// projection), then a fused element-wise pass. Forward keeps the gates,
// cells and (projected) hidden values of every step; Backward runs through
// time in reverse with one sgemm per step for the recurrent gradient (and
// one for the projection), then one sgemm each for the gradients of w_x,
// w_r, w_p and the input over all rows.
//
// Thread-safety: as Layer.
#ifndef ASGD_MODEL_LAYERS_LSTM_H_
#define ASGD_MODEL_LAYERS_LSTM_H_

#include <cstdint>
#include <vector>

#include "model/layers/layer.h"

namespace asgd {

class LstmLayer final : public Layer {
 public:
  // `in_dim` inputs per row; `spec` as validated by ValidateModelSpec.
  // Scratch for max_rows rows.
  LstmLayer(int in_dim, const LstmLayerSpec& spec, int max_rows);

  FeatureShape in_shape() const override { return {1, 1, in_dim_}; }
  FeatureShape out_shape() const override { return {1, 1, out_dim_}; }

  void Forward(const float* params, const float* in, int sequences, int steps,
               float* out) override;
  void Backward(const float* params, const float* in, const float* out,
                const float* dout, int sequences, int steps, float* dparams,
                float* din) override;

 private:
  // What Forward keeps of one direction, [max_rows, ...] each.
  struct Cache {
    std::vector<float> gates;   // [4*cells]: i, f, g, o after their squashing
    std::vector<float> cell;    // [cells]: c (clipped)
    std::vector<float> tanh_c;  // [cells]: tanh(c)
    std::vector<float> hidden;  // [cells]: h (only with a projection)
  };

  // Parameters of direction `dir` within the layer's part of the flat model.
  int64_t DirectionOffset(int dir) const { return dir * direction_params_; }
  // The row block of the step that direction `dir` visits s-th.
  static int StepAt(int dir, int s, int steps) {
    return dir == 0 ? s : steps - 1 - s;
  }

  void ForwardDirection(int dir, const float* params, const float* in,
                        int sequences, int steps, float* out);
  void BackwardDirection(int dir, const float* params, const float* in,
                         const float* out, const float* dout, int sequences,
                         int steps, float* dparams, float* din);

  const int in_dim_;
  const int cells_;
  const int projection_;  // 0: none
  const int rec_;         // projection_ or cells_
  const float cell_clip_;
  const int directions_;
  const int out_dim_;     // directions_ * rec_
  const int64_t direction_params_;
  Cache cache_[2];
  std::vector<float> zeros_;     // [cells]: the state before step 0
  std::vector<float> dgates_;    // [max_rows, 4*cells]
  std::vector<float> drec_;      // [max_rows, rec]: dL/dr of every row
  std::vector<float> dhidden_;   // [max_rows, cells]: dL/dh of one step
  std::vector<float> dcell_;     // [max_rows, cells]: dL/dc carried back
};

}  // namespace asgd

#endif  // ASGD_MODEL_LAYERS_LSTM_H_
