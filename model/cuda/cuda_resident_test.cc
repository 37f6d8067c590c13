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

// The next minibatch staged while this one computes (StageNext,
// cuda_batch_stager.h): the same gradients bit for bit as without it, for
// announcements that come true, a wrong guess, a forward call in between and
// a shorter batch; and the staged copy is taken during the call before
// (seen by overwriting the announced memory after that call, which a caller
// must not do: the gradient is still the original batch's).
TEST(CudaResidentTest, StagedMinibatchesGiveTheSameGradientsBitForBit) {
  SKIP_WITHOUT_CUDA();
  const ModelSpec spec = Dnn(96);
  CudaOptions options;
  options.math = CudaOptions::MathMode::kFp32;
  auto plain = CreateCudaBackend(spec, 32, options);
  auto staged = CreateCudaBackend(spec, 32, options);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(staged.ok()) << staged.status();
  ASSERT_TRUE((*staged)->stages_batches());
  const std::vector<float> params = InitialParams(spec, 8);
  ASSERT_TRUE((*plain)->LoadModel(params).ok());
  ASSERT_TRUE((*staged)->LoadModel(params).ok());
  std::vector<TestBatch> batches = RandomBatches(spec, 6, 32, 3);
  TestBatch shorter = batches[5];
  shorter.inputs.resize(7 * spec.input_dim());
  shorter.labels.resize(7);
  const int64_t n = static_cast<int64_t>(params.size());

  // Step i computes `order[i]` and first announces `guess[i]` (-1: none).
  const std::vector<int> order = {0, 1, 2, 3, 4, 1};
  const std::vector<int> guess = {1, 2, 4, 4, 1, -1};  // 3 was not expected
  std::vector<float> a(n), b(n);
  for (size_t i = 0; i < order.size(); ++i) {
    SCOPED_TRACE(i);
    if (guess[i] >= 0) (*staged)->StageNext(batches[guess[i]].batch());
    auto r1 = (*plain)->AccumulateGradient(batches[order[i]].batch());
    auto r2 = (*staged)->AccumulateGradient(batches[order[i]].batch());
    ASSERT_TRUE(r1.ok()) << r1.status();
    ASSERT_TRUE(r2.ok()) << r2.status();
    EXPECT_EQ(r1->loss, r2->loss);
    EXPECT_EQ(r1->correct, r2->correct);
    ASSERT_TRUE((*plain)->TakeAverage(absl::MakeSpan(a)).ok());
    ASSERT_TRUE((*staged)->TakeAverage(absl::MakeSpan(b)).ok());
    EXPECT_EQ(a, b);
    if (i == 2) {  // a forward call between staging 4 and computing 3
      std::vector<int32_t> p1(32), p2(32);
      ASSERT_TRUE((*plain)
                      ->Predict(params, batches[5].batch(), absl::MakeSpan(p1))
                      .ok());
      ASSERT_TRUE((*staged)
                      ->Predict(params, batches[5].batch(), absl::MakeSpan(p2))
                      .ok());
      EXPECT_EQ(p1, p2);
    }
  }
  // A shorter batch staged, then computed.
  (*staged)->StageNext(shorter.batch());
  ASSERT_TRUE((*staged)->AccumulateGradient(batches[0].batch()).ok());
  ASSERT_TRUE((*staged)->TakeAverage(absl::MakeSpan(b)).ok());
  ASSERT_TRUE((*staged)->AccumulateGradient(shorter.batch()).ok());
  ASSERT_TRUE((*plain)->AccumulateGradient(shorter.batch()).ok());
  ASSERT_TRUE((*plain)->TakeAverage(absl::MakeSpan(a)).ok());
  ASSERT_TRUE((*staged)->TakeAverage(absl::MakeSpan(b)).ok());
  EXPECT_EQ(a, b);

  // The copy is taken during the call before: overwrite batch 2's memory
  // after it was staged; its gradient is still the original's.
  ASSERT_TRUE((*plain)->AccumulateGradient(batches[2].batch()).ok());
  ASSERT_TRUE((*plain)->TakeAverage(absl::MakeSpan(a)).ok());
  (*staged)->StageNext(batches[2].batch());
  ASSERT_TRUE((*staged)->AccumulateGradient(batches[0].batch()).ok());
  ASSERT_TRUE((*staged)->TakeAverage(absl::MakeSpan(b)).ok());
  for (float& v : batches[2].inputs) v = 0.0f;
  ASSERT_TRUE((*staged)->AccumulateGradient(batches[2].batch()).ok());
  ASSERT_TRUE((*staged)->TakeAverage(absl::MakeSpan(b)).ok());
  EXPECT_EQ(a, b) << "the staged copy was not used";
}

}  // namespace
}  // namespace asgd
