#include "model/cuda/cuda_test_util.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "model/cpu_backend.h"

namespace asgd {

CompareReport ExpectCudaMatchesCpu(const ModelSpec& spec,
                                   const CudaOptions& options,
                                   const std::vector<BatchShape>& shapes,
                                   double kink_clear, uint32_t seed,
                                   const std::string& name) {
  CompareReport worst;
  int max_rows = 1;
  for (const BatchShape& s : shapes) {
    max_rows = std::max(max_rows, s.sequences * s.steps);
  }
  auto gpu = CreateCudaBackend(spec, max_rows, options);
  EXPECT_TRUE(gpu.ok()) << gpu.status();
  auto cpu = CreateCpuBackend(spec, max_rows);
  EXPECT_TRUE(cpu.ok()) << cpu.status();
  if (!gpu.ok() || !cpu.ok()) return worst;
  EXPECT_EQ((*gpu)->name(), "cuda");

  const std::vector<float> params = CompareParams(spec, seed);
  const CompareTolerance tol = ToleranceFor(options.math);
  for (size_t i = 0; i < shapes.size(); ++i) {
    const BatchShape& s = shapes[i];
    const std::string context =
        absl::StrCat(name, " ", CudaMathModeName(options.math), ", batch ",
                     s.sequences, " x ", s.steps);
    auto batch =
        MakeCompareBatch(spec, params, s.sequences, s.steps, kink_clear, 0.25,
                         seed + 1 + static_cast<uint32_t>(i));
    EXPECT_TRUE(batch.ok()) << context << ": " << batch.status();
    if (!batch.ok()) continue;
    const CompareReport r =
        ExpectBackendsAgree(**cpu, **gpu, params, *batch, tol, context);
    worst.grad = std::max(worst.grad, r.grad);
    worst.loss = std::max(worst.loss, r.loss);
    worst.logp = std::max(worst.logp, r.logp);
  }
  ::testing::Test::RecordProperty("max_relative_grad_error",
                                  absl::StrCat(worst.grad));
  ::testing::Test::RecordProperty("max_relative_loss_error",
                                  absl::StrCat(worst.loss));
  ::testing::Test::RecordProperty("max_relative_logp_error",
                                  absl::StrCat(worst.logp));
  return worst;
}

}  // namespace asgd
