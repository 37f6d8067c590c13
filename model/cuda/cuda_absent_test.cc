// Stands in for cuda_backend_test (and cuda_conv_test, cuda_lstm_test) in a
// build without a CUDA toolkit (see model/cuda/cuda.bzl): the CUDA backend and
// its CPU-vs-CUDA tests were not built, which the test totals report as a
// skipped test with the reason. It also checks that such a build says so
// clearly. (layer_impl_test still checks the CUDA layers' steps on the CPU.)
#include "absl/status/status.h"
#include "asgd_cuda/cuda_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/cuda/cuda_loader.h"

namespace asgd {
namespace {

using ::testing::HasSubstr;

TEST(CudaBackendTest, NotBuiltWithoutACudaToolkit) {
  const absl::Status status = CudaBuildStatus();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr("built without CUDA support"));
  EXPECT_EQ(LoadCudaPlugin().status().code(), absl::StatusCode::kUnavailable);
  GTEST_SKIP() << "this build has no CUDA backend to test: "
               << ASGD_CUDA_SEARCH;
}

}  // namespace
}  // namespace asgd
