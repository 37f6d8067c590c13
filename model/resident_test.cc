// The resident model's default implementation (model/backend.h), on the CPU
// backend: the average and the 1-bit encoding against the host reference,
// bit for bit, and its refusals. The CUDA backend's device implementation
// runs the same check in model/cuda/cuda_resident_test.cc.
#include <cmath>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "compression/one_bit_plan.h"
#include "gtest/gtest.h"
#include "model/backend.h"
#include "model/cpu_backend.h"
#include "model/model_spec.h"
#include "model/resident_check.h"

namespace asgd {
namespace {

ModelSpec Small() {
  ModelSpec spec;
  spec.feature_dim = 6;
  spec.context = 1;  // 18 inputs
  spec.layers = {LayerSpec::Dense(40, Activation::kRelu),
                 LayerSpec::Dense(24, Activation::kTanh)};
  spec.num_classes = 7;
  return spec;
}

TEST(ResidentModelTest, MatchesTheHostReferenceBitForBit) {
  const ModelSpec spec = Small();
  auto backend = CreateCpuBackend(spec, 32);
  auto reference = CreateCpuBackend(spec, 32);
  ASSERT_TRUE(backend.ok() && reference.ok());
  const std::vector<float> params = InitialParams(spec, 5);
  ExpectResidentMatches(**backend, **reference, params,
                        RandomBatches(spec, 3, 32, 9),
                        VariedPlan(static_cast<int64_t>(params.size())),
                        /*exact=*/true, 0.0);
}

TEST(ResidentModelTest, TopKIsTheReferenceBitForBit) {
  const ModelSpec spec = Small();
  auto backend = CreateCpuBackend(spec, 8);
  ASSERT_TRUE(backend.ok());
  ExpectTopKMatches(**backend, InitialParams(spec, 3), 21);
}

TEST(ResidentModelTest, RefusesCallsItCannotServe) {
  const ModelSpec spec = Small();
  auto backend = CreateCpuBackend(spec, 8);
  ASSERT_TRUE(backend.ok());
  ModelBackend& b = **backend;
  const auto batches = RandomBatches(spec, 1, 8, 1);
  EXPECT_EQ(b.AccumulateGradient(batches[0].batch()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  const int64_t n = ModelParamCount(spec);
  std::vector<float> wrong(n - 1);
  EXPECT_EQ(b.LoadModel(wrong).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b.TakeAverage(absl::MakeSpan(wrong)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b.RestoreResidual(n - 1, std::vector<float>(2)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b.RestoreResidual(-1, std::vector<float>(1)).code(),
            absl::StatusCode::kInvalidArgument);
  // A plan past the model's end, and an output of the wrong size.
  const OneBitPlan past = MakeOneBitPlan({{n - 2, 4, 4, 4}});
  std::vector<char> out(past.total_bytes);
  EXPECT_EQ(b.TakeOneBit(past, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);
  const OneBitPlan plan = MakeOneBitPlan({{0, 4, 4, 4}});
  std::vector<char> small(plan.total_bytes - 1);
  EXPECT_EQ(b.TakeOneBit(plan, absl::MakeSpan(small)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ResidentModelTest, ANonFiniteGradientIsNotAdded) {
  const ModelSpec spec = Small();
  auto backend = CreateCpuBackend(spec, 8);
  ASSERT_TRUE(backend.ok());
  ModelBackend& b = **backend;
  std::vector<float> params = InitialParams(spec, 2);
  params[3] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(b.LoadModel(params).ok());
  const auto batches = RandomBatches(spec, 1, 8, 4);
  auto r = b.AccumulateGradient(batches[0].batch());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->gradient_finite);
  EXPECT_EQ(b.accumulated(), 0);
  std::vector<float> average(params.size(), 1.0f);
  ASSERT_TRUE(b.TakeAverage(absl::MakeSpan(average)).ok());
  for (float v : average) ASSERT_EQ(v, 0.0f);
}

TEST(ResidentModelTest, ANonFiniteResidualEncodesNothingAndChangesNothing) {
  const ModelSpec spec = Small();
  auto backend = CreateCpuBackend(spec, 8);
  ASSERT_TRUE(backend.ok());
  ModelBackend& b = **backend;
  const std::vector<float> params = InitialParams(spec, 2);
  ASSERT_TRUE(b.LoadModel(params).ok());
  ASSERT_TRUE(b.AccumulateGradient(RandomBatches(spec, 1, 8, 4)[0].batch())
                  .ok());
  ExpectNonFiniteResidualRefused(b, static_cast<int64_t>(params.size()) - 1);
}

}  // namespace
}  // namespace asgd
