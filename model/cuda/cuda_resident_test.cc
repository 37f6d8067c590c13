// The CUDA backend's resident model (device kernels of cuda_resident.cu and
// cuda_resident_model.cu) against the host reference: the averaged
// gradient against the CPU backend's, the 1-bit bytes and residual against
// EncodeOneBitPlan (resident_check.h). Skips without a CUDA device.
#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "model/cpu_backend.h"
#include "model/cuda/cuda_backend.h"
#include "model/cuda/cuda_test_util.h"
#include "model/model_spec.h"
#include "model/resident_check.h"

namespace asgd {
namespace {

ModelSpec Dnn(int width) {
  ModelSpec spec;
  spec.feature_dim = 40;
  spec.context = 5;  // 440 inputs
  spec.layers = {LayerSpec::Dense(width, Activation::kRelu),
                 LayerSpec::Dense(width, Activation::kSigmoid)};
  spec.num_classes = 97;
  return spec;
}

TEST(CudaResidentTest, MatchesTheHostReference) {
  SKIP_WITHOUT_CUDA();
  const ModelSpec spec = Dnn(300);
  CudaOptions options;
  options.math = CudaOptions::MathMode::kFp32;
  auto cuda = CreateCudaBackend(spec, 64, options);
  auto cpu = CreateCpuBackend(spec, 64);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  ASSERT_TRUE(cpu.ok());
  const std::vector<float> params = InitialParams(spec, 11);
  ExpectResidentMatches(**cuda, **cpu, params, RandomBatches(spec, 3, 64, 5),
                        VariedPlan(static_cast<int64_t>(params.size())),
                        /*exact=*/false, 1e-4);
}

// The device's top-k selection (cuda_top_k.cu) on values of every kind,
// ties included: bit for bit the host reference's bytes and residual.
TEST(CudaResidentTest, TopKIsTheHostReferenceBitForBit) {
  SKIP_WITHOUT_CUDA();
  const ModelSpec spec = Dnn(300);
  auto cuda = CreateCudaBackend(spec, 8);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  ExpectTopKMatches(**cuda, InitialParams(spec, 4), 22);
}

TEST(CudaResidentTest, RefusesAndFlagsAsTheDefaultDoes) {
  SKIP_WITHOUT_CUDA();
  const ModelSpec spec = Dnn(32);
  auto cuda = CreateCudaBackend(spec, 8);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  ModelBackend& b = **cuda;
  const auto batches = RandomBatches(spec, 1, 8, 1);
  EXPECT_EQ(b.AccumulateGradient(batches[0].batch()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  std::vector<float> params = InitialParams(spec, 2);
  params[7] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(b.LoadModel(params).ok());
  auto r = b.AccumulateGradient(batches[0].batch());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->gradient_finite);
  EXPECT_EQ(b.accumulated(), 0);
  // A non-finite residual: nothing encoded, the residual unchanged.
  params[7] = 0.0f;
  ASSERT_TRUE(b.LoadModel(params).ok());
  ASSERT_TRUE(b.AccumulateGradient(batches[0].batch()).ok());
  ExpectNonFiniteResidualRefused(b, 0);
  // The backend still works after the refusal.
  ASSERT_TRUE(b.AccumulateGradient(batches[0].batch()).ok());
  EXPECT_EQ(b.accumulated(), 1);
}

TEST(CudaResidentTest, APinnedBufferLoadsTheSameModel) {
  SKIP_WITHOUT_CUDA();
  const ModelSpec spec = Dnn(64);
  auto cuda = CreateCudaBackend(spec, 16);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  ModelBackend& b = **cuda;
  const std::vector<float> params = InitialParams(spec, 4);
  const auto batches = RandomBatches(spec, 1, 16, 2);
  const int64_t n = static_cast<int64_t>(params.size());
  auto average_from = [&](const std::vector<float>& model) {
    std::vector<float> average(n);
    EXPECT_TRUE(b.LoadModel(model).ok());
    EXPECT_TRUE(b.AccumulateGradient(batches[0].batch()).ok());
    EXPECT_TRUE(b.TakeAverage(absl::MakeSpan(average)).ok());
    return average;
  };
  const std::vector<float> staged = average_from(params);
  std::vector<float> pinned_copy = params;
  ASSERT_TRUE(b.PinHostBuffer(pinned_copy).ok());
  ASSERT_TRUE(b.PinHostBuffer(pinned_copy).ok());  // twice: still one pin
  EXPECT_EQ(average_from(pinned_copy), staged);
  // Another model through the pinned buffer, then back to staging.
  for (float& w : pinned_copy) w *= 0.5f;
  const std::vector<float> halved = average_from(pinned_copy);
  EXPECT_NE(halved, staged);
  b.UnpinHostBuffer(pinned_copy);
  b.UnpinHostBuffer(pinned_copy);  // not pinned: nothing
  EXPECT_EQ(average_from(pinned_copy), halved);
  EXPECT_EQ(b.PinHostBuffer(std::vector<float>(n - 1)).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
