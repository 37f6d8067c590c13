// DnnBackend: forward/backward of the DNN acoustic model (common/dnn_spec.h)
// behind one interface, so the training loop does not care where the math
// runs. CreateCpuDnn() gives the OpenBLAS backend; the CUDA backend
// implements the same interface.
//
// Parameters and gradients are flat float vectors in ModelLayout order
// (layer0/weight [out,in] row-major, layer0/bias, layer1/weight, ...).
// Inputs are row-major [n, input_dim]; labels are class ids.
//
//   auto dnn = CreateCpuDnn(spec, /*max_batch=*/256);
//   auto r = (*dnn)->ComputeGradient(params, inputs, labels, grad);
//   // r->loss: mean cross-entropy; grad: d(mean loss)/d(params)
//
// Thread-safety: a backend owns scratch buffers; use one per thread.
#ifndef ASGD_WORKER_DNN_H_
#define ASGD_WORKER_DNN_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/dnn_spec.h"

namespace asgd {

struct BatchResult {
  double loss = 0;  // mean cross-entropy over the batch (nats)
  int correct = 0;  // frames whose argmax equals the label
};

class DnnBackend {
 public:
  virtual ~DnnBackend() = default;

  virtual absl::string_view name() const = 0;
  virtual const DnnSpec& spec() const = 0;

  // Gradient of the batch's mean cross-entropy with respect to every
  // parameter, written to `grad` (same size as `params`). The batch size is
  // labels.size(), at most the backend's max_batch. InvalidArgument on size
  // mismatches or labels outside [0, num_classes).
  virtual absl::StatusOr<BatchResult> ComputeGradient(
      absl::Span<const float> params, absl::Span<const float> inputs,
      absl::Span<const int32_t> labels, absl::Span<float> grad) = 0;

  // Argmax class of each of the n = out.size() inputs (n <= max_batch).
  virtual absl::Status Predict(absl::Span<const float> params,
                               absl::Span<const float> inputs,
                               absl::Span<int32_t> out) = 0;
};

// The OpenBLAS backend. InvalidArgument for a bad spec or max_batch < 1.
absl::StatusOr<std::unique_ptr<DnnBackend>> CreateCpuDnn(const DnnSpec& spec,
                                                         int max_batch);

// Number of parameters of `spec` (the flat vector's length).
int64_t DnnParamCount(const DnnSpec& spec);

// Sets the number of OpenBLAS threads for the process (1 is best when
// several workers share a machine).
void SetBlasThreads(int threads);

}  // namespace asgd

#endif  // ASGD_WORKER_DNN_H_
