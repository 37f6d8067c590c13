#include "model/cuda/cuda_soft_targets.h"

#include <cuda_runtime.h>

#include "common/status_macros.h"
#include "model/cuda/cuda_exec.cuh"
#include "model/cuda/loss_impl.h"

namespace asgd {
namespace cuda {

absl::Status SoftTargetPass::Run(const Context& ctx, const Batch& batch,
                                 int rows, int max_rows, int classes,
                                 const float* logits, const int32_t* labels,
                                 float inv, float* dout, float* row_loss) {
  if (teacher_.get() == nullptr) {
    const int64_t most = max_rows;
    ASGD_ASSIGN_OR_RETURN(teacher_,
                          DeviceBuffer<float>::Create(most * classes));
    ASGD_ASSIGN_OR_RETURN(scratch_,
                          DeviceBuffer<float>::Create(most * 2 * classes));
  }
  ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
      teacher_.get(), batch.teacher.data(),
      batch.teacher.size() * sizeof(float), cudaMemcpyHostToDevice,
      ctx.stream));
  CudaExec x(ctx);
  return cuda_ops::SoftTargets(x, logits, teacher_.get(), labels, rows,
                               classes, batch.teacher_weight,
                               batch.temperature, inv, scratch_.get(), dout,
                               row_loss);
}

}  // namespace cuda
}  // namespace asgd
