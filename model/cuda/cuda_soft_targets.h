// SoftTargetPass: the CUDA backend's teacher-student loss for a taught batch
// (model/backend.h Batch::teacher): uploads the teacher's log-posteriors and
// runs loss_impl.h's soft-target pass on the device, which overwrites the
// softmax cross-entropy kernel's gradient on the logits and its per-row
// loss (its per-row hits stand). Its buffers ([max_rows, classes] of teacher
// rows and [max_rows, 2 classes] of scratch) are made at the first taught
// batch, so a backend that never sees one holds none.
//
// Internal to the plugin; device pointers throughout.
//
// Thread-safety: as its Context (one thread at a time).
#ifndef ASGD_MODEL_CUDA_CUDA_SOFT_TARGETS_H_
#define ASGD_MODEL_CUDA_CUDA_SOFT_TARGETS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "model/backend.h"
#include "model/cuda/cuda_util.h"

namespace asgd {
namespace cuda {

class SoftTargetPass {
 public:
  // Enqueues on ctx.stream, for `rows` <= max_rows rows of `classes` logits
  // (a multi-frame model's heads: batch.rows() x output_frames) with their
  // labels (device), `inv` = 1 / labelled rows: dout and row_loss as
  // loss_impl.h says. The batch was checked (batch_check.h): its teacher
  // holds rows x classes values.
  absl::Status Run(const Context& ctx, const Batch& batch, int rows,
                   int max_rows, int classes, const float* logits,
                   const int32_t* labels, float inv, float* dout,
                   float* row_loss);

 private:
  DeviceBuffer<float> teacher_, scratch_;
};

}  // namespace cuda
}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_CUDA_SOFT_TARGETS_H_
