// ModelBackend: forward and backward of a whole model (model/model_spec.h)
// behind one interface, so that training loops do not care what the model
// is or where its math runs. CreateCpuBackend() (model/cpu_backend.h) runs
// the layers of model/layers/ with OpenBLAS; the CUDA plugin
// (model/cuda/) implements the same interface on a GPU.
//
// Parameters and gradients are flat float vectors in ModelLayout order
// (ModelTensors(spec)). A Batch is `sequences` × `steps` input rows,
// time-major (row t * sequences + b is step t of sequence b; frame models
// use steps = 1), each input_dim() floats, with one label per row: a class
// id, or kNoLabel for rows that only give context (the extra frames around
// a recurrent model's chunk): they are computed but neither scored nor
// trained on.
//
//   auto backend = CreateCpuBackend(spec, /*max_rows=*/256);
//   Batch batch{sequences, steps, inputs, labels};
//   auto r = (*backend)->ComputeGradient(params, batch, grad);
//   // r->loss: mean cross-entropy over labelled rows;
//   // grad: d(mean loss)/d(params)
//
// Thread-safety: a backend owns scratch buffers; use one per thread.
#ifndef ASGD_MODEL_BACKEND_H_
#define ASGD_MODEL_BACKEND_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "model/model_spec.h"

namespace asgd {

// The label of a row that is not scored.
inline constexpr int32_t kNoLabel = -1;

struct Batch {
  int sequences = 0;
  int steps = 1;
  absl::Span<const float> inputs;   // [sequences * steps, input_dim]
  absl::Span<const int32_t> labels;  // [sequences * steps]
  int rows() const { return sequences * steps; }
};

struct BatchResult {
  double loss = 0;   // mean cross-entropy over labelled rows (nats)
  int correct = 0;   // labelled rows whose argmax equals the label
  int labelled = 0;  // rows with a label
};

class ModelBackend {
 public:
  virtual ~ModelBackend() = default;

  virtual absl::string_view name() const = 0;
  virtual const ModelSpec& spec() const = 0;
  // The largest batch (sequences * steps rows) a call may pass.
  virtual int max_rows() const = 0;

  // Gradient of the batch's mean cross-entropy over its labelled rows with
  // respect to every parameter, written to `grad` (same size as `params`);
  // all zero when no row is labelled. InvalidArgument on size mismatches, a
  // batch larger than max_rows(), steps > 1 for a frame model, or labels
  // outside [0, num_classes) other than kNoLabel.
  virtual absl::StatusOr<BatchResult> ComputeGradient(
      absl::Span<const float> params, const Batch& batch,
      absl::Span<float> grad) = 0;

  // Log-posteriors (natural log of the softmax) of every row, written to
  // `out` ([rows, num_classes]); labels are not read. Same errors as above.
  virtual absl::Status LogPosteriors(absl::Span<const float> params,
                                     const Batch& batch,
                                     absl::Span<float> out) = 0;

  // Argmax class of every row, written to `out` ([rows]); labels are not
  // read. Same errors as above.
  virtual absl::Status Predict(absl::Span<const float> params,
                               const Batch& batch,
                               absl::Span<int32_t> out) = 0;
};

// Sets the number of OpenBLAS threads for the process (1 is best when
// several workers share a machine).
void SetBlasThreads(int threads);

}  // namespace asgd

#endif  // ASGD_MODEL_BACKEND_H_
