// Test support for comparing two ModelBackends on the same model and
// batches: the CUDA backend against the CPU backend in the CPU-vs-CUDA tests
// (cuda_backend_test.cc, cuda_conv_test.cc, cuda_lstm_test.cc). Nothing here
// needs CUDA, so backend_compare_test.cc checks the harness itself on every
// machine (its reference against the CPU backend, that its batches clear
// every decision threshold, and that it reports a backend that is wrong).
//
// Two correct backends legitimately differ where a discrete decision sits
// within rounding of its threshold: a ReLU input at 0, the two largest values
// of a pooling window, an LSTM cell at its clip, the two largest logits. The
// batches made here keep every such decision of every row at least
// `kink_clear` away from its threshold, measured on a double-precision
// forward pass (ReferenceForward); rows whose two largest logits are closer
// than a tolerance are left out of the argmax comparisons.
//
//   const ModelSpec spec = CompareCnn(Activation::kRelu);
//   const std::vector<float> params = CompareParams(spec, /*seed=*/7);
//   auto batch = MakeCompareBatch(spec, params, 7, 1, /*kink_clear=*/1e-3,
//                                 /*unlabelled=*/0.25, /*seed=*/8);
//   ExpectBackendsAgree(*cpu, *gpu, params, *batch, tolerance, "cnn 7 rows");
//
// Thread-safety: pure functions (ExpectBackendsAgree uses the backends it is
// given, one call at a time).
#ifndef ASGD_MODEL_CUDA_BACKEND_COMPARE_H_
#define ASGD_MODEL_CUDA_BACKEND_COMPARE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/backend.h"
#include "model/cuda/cuda_options.h"
#include "model/model_spec.h"

namespace asgd {

// The model's forward pass over one sequence of `steps` rows (a frame
// model: steps == 1), in double precision, written directly from the
// equations of model/model_spec.h (not from the CPU layers' code).
struct ReferenceForward {
  std::vector<double> logits;  // [steps, num_classes]
  // The smallest distance of any threshold decision to its threshold: |x|
  // at every ReLU, the gap between the two largest values of every pooling
  // window, ||c| - cell_clip| at every clipped LSTM cell (infinity if none).
  double kink_margin = 0;
  int64_t clipped = 0;  // LSTM cell values that hit the clip
};
ReferenceForward RunReference(const ModelSpec& spec,
                              absl::Span<const float> params,
                              absl::Span<const float> inputs, int steps);

// A batch and what the reference says about it.
struct CompareBatch {
  int sequences = 0;
  int steps = 1;
  std::vector<float> inputs;         // time-major, as Batch
  std::vector<int32_t> labels;       // kNoLabel for unlabelled rows
  std::vector<int32_t> ref_argmax;   // per row, of the reference logits
  std::vector<double> logit_margin;  // per row: top logit - runner-up
  std::vector<double> ref_logits;    // [rows, num_classes]
  double kink_margin = 0;            // smallest over all sequences
  int64_t clipped = 0;               // over all sequences

  Batch batch() const { return Batch{sequences, steps, inputs, labels}; }
  int rows() const { return sequences * steps; }
};

// `sequences` × `steps` rows of N(0, 1) inputs, each sequence redrawn until
// its reference kink margin is at least kink_clear; labels uniform, each row
// kNoLabel with probability `unlabelled` (1: every row). FailedPrecondition
// when some sequence cannot be drawn clear in 20000 attempts.
absl::StatusOr<CompareBatch> MakeCompareBatch(const ModelSpec& spec,
                                              absl::Span<const float> params,
                                              int sequences, int steps,
                                              double kink_clear,
                                              double unlabelled, uint32_t seed);

// InitialParams(spec, seed) plus N(0, 0.01²) noise on every value and
// N(0, 0.1²) on the biases, so that no value is special.
std::vector<float> CompareParams(const ModelSpec& spec, uint32_t seed);

// How close the compared backend must come to the reference backend.
struct CompareTolerance {
  double grad;    // per tensor: max |got - want| <= grad * max |want|
  double loss;    // |got - want| <= loss * (1 + want)
  double logp;    // per value: |got - want| <= logp * (1 + |want|)
  double margin;  // rows whose logit_margin is below this may differ in
                  // argmax (correct counts, Predict)
};
// fp32 GEMMs: 1e-4 each (margin 1e-4); tf32 (inputs rounded to 10 mantissa
// bits): grad 2e-2, loss 1e-2, logp 2e-2, margin 2e-2.
CompareTolerance ToleranceFor(CudaOptions::MathMode math);

// The largest errors one comparison saw, each relative to its tolerance's
// scale (grad: / max |want| of the tensor; loss: / (1 + want); logp: / (1 +
// |want|)).
struct CompareReport {
  double grad = 0;
  double loss = 0;
  double logp = 0;
};

// Runs ComputeGradient, LogPosteriors and Predict of both backends on
// `batch` with `params` and records a gtest failure (naming `context`, the
// tensor and the flat index) for each disagreement: the labelled count
// (exactly), the loss, the correct count of each backend (within the rows
// whose margin is clear, it must equal the reference's hits; the others may
// count either way), every tensor of ModelTensors(spec), every
// log-posterior, and every prediction of a clear row (equal to want's and to
// the reference argmax). The compared gradient buffer starts as NaN, so an
// element a backend does not write fails. Returns the worst errors seen.
CompareReport ExpectBackendsAgree(ModelBackend& want, ModelBackend& got,
                                  absl::Span<const float> params,
                                  const CompareBatch& batch,
                                  const CompareTolerance& tol,
                                  const std::string& context);

// Models for the comparisons, small and of odd sizes so that no index
// mistake hides behind a multiple of a block size:
//   CompareCnn:   9 frames × 17 bins; conv(4, 3x4, pool 1x2), conv(3, 3x3,
//                 pool 2x2: a time step and a frequency bin left over),
//                 dense(7), softmax(5); every activation `act`.
//   CompareLstm:  11 inputs; lstm(8, projection 5, cell_clip 0.5),
//                 lstm(7), dense(9, tanh), softmax(6).
//   CompareBlstm: 9 inputs; blstm(6, projection 4, cell_clip 0.5),
//                 blstm(5), softmax(5).
ModelSpec CompareCnn(Activation act);
ModelSpec CompareLstm();
ModelSpec CompareBlstm();

}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_BACKEND_COMPARE_H_
