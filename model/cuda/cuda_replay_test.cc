// DeviceExactCopy (cuda_replay.h) on a GPU against ApplyCompressedRange
// (step/compressed_apply.h), the host replay's and the server's step: the
// device copy must equal the host's bit for bit after every update of a
// sequence, for one-bit, top-k and mixed updates, with and without weight
// decay, dense and under a pruned model's mask; an update that overflows is
// refused; the backend's copies (CreateExactCopy, what --replay_on_device
// uses) replay on a thread that is not the backend's; a model mirrored from
// those copies loads device to device as the same model. Skips without a
// CUDA device (replay_impl_test runs the same pass on the CPU everywhere).
#include "model/cuda/cuda_replay.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "model/cuda/cuda_backend.h"
#include "model/cuda/cuda_test_util.h"
#include "model/cuda/host_replay_copy.h"
#include "model/model_spec.h"
#include "model/cuda/replay_cases.h"
#include "step/compressed_apply.h"
#include "step/optimizer.h"

namespace asgd {
namespace {

using replay_cases::FirstDifference;
using replay_cases::MakeUpdate;
using replay_cases::PlanOf;
using replay_cases::Sgd;
using replay_cases::Update;
using replay_cases::Weights;

std::unique_ptr<DeviceExactCopy> CopyOf(const std::vector<float>& host) {
  auto copy = DeviceExactCopy::Create(static_cast<int64_t>(host.size()));
  EXPECT_TRUE(copy.ok()) << copy.status();
  EXPECT_TRUE((*copy)->Upload(host).ok());
  return std::move(*copy);
}

std::vector<float> Download(const DeviceExactCopy& copy) {
  std::vector<float> host(copy.size());
  EXPECT_TRUE(copy.Download(absl::MakeSpan(host)).ok());
  return host;
}

TEST(CudaReplayTest, SequencesOfUpdatesMatchTheHostBitForBit) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(11);
  const int64_t n = 300007;
  for (float wd : {0.0f, 1e-3f}) {
    std::vector<float> host = Weights(n, &rng);
    std::unique_ptr<DeviceExactCopy> device = CopyOf(host);
    for (int step = 0; step < 12; ++step) {
      const int kinds = step % 3;  // one-bit, top-k, mixed
      const Update u = MakeUpdate(n, kinds, &rng);
      const float lr = 0.01f + 0.001f * step;
      ApplyCompressedRange(Sgd(lr, wd), u.chunks, 0, n, host.data(), nullptr,
                           UpdateContext{});
      const ReplayPlan plan = PlanOf(u);
      ASSERT_TRUE(device->Replay(plan, lr, wd).ok());
      EXPECT_EQ(device->last_upload_bytes(), plan.bytes());
      ASSERT_EQ(FirstDifference(Download(*device), host), -1)
          << "after update " << step << " (kinds " << kinds << ", wd " << wd
          << ")";
    }
  }
}

// A pruned model's copy: the mask uploaded with the weights is replayed
// under, on the device, as the server applies it.
TEST(CudaReplayTest, APrunedCopyReplaysUnderItsMask) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(15);
  auto copy = DeviceExactCopy::Create(300007);
  ASSERT_TRUE(copy.ok()) << copy.status();
  replay_cases::ExpectReplaysUnderTheMask(copy->get(), &rng);
}

TEST(CudaReplayTest, RefusesOverflowsBadRatesAndOtherSizes) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(12);
  const int64_t n = 5000;
  const Update u = MakeUpdate(n, 0, &rng);
  const ReplayPlan plan = PlanOf(u);
  std::unique_ptr<DeviceExactCopy> device = CopyOf(std::vector<float>(n, 0.0f));
  EXPECT_EQ(device->Replay(plan, 1e38f, 0.0f).code(),
            absl::StatusCode::kDataLoss);
  const std::vector<float> before = Download(*device);
  for (float lr : {0.0f, -1.0f, NAN}) {
    EXPECT_EQ(device->Replay(plan, lr, 0.0f).code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(device->Replay(plan, 0.1f, -1.0f).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      device->Replay(PlanOf(MakeUpdate(n - 1, 0, &rng)), 0.1f, 0.0f).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(device->Upload(std::vector<float>(n + 1, 1.0f)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FirstDifference(Download(*device), before), -1)
      << "a refused call wrote the copy";
  EXPECT_EQ(DeviceExactCopy::Create(-1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The copies the worker's pull threads replay on: made by the backend on
// its device, used from other threads, while the backend itself trains.
TEST(CudaReplayTest, TheBackendsCopiesReplayOnOtherThreads) {
  SKIP_WITHOUT_CUDA();
  ModelSpec spec;
  spec.feature_dim = 8;
  spec.num_classes = 4;
  spec.layers = {LayerSpec::Dense(16, Activation::kRelu)};
  auto backend = CreateCudaBackend(spec, 16, CudaOptions{});
  ASSERT_TRUE(backend.ok()) << backend.status();
  std::mt19937 rng(13);
  const int64_t n = 100003;
  for (int copy_index = 0; copy_index < 2; ++copy_index) {
    auto made = (*backend)->CreateExactCopy(n);
    ASSERT_TRUE(made.ok()) << made.status();
    std::unique_ptr<ExactCopy> copy = *std::move(made);
    ASSERT_EQ(copy->size(), n);
    std::vector<float> host = Weights(n, &rng);
    std::vector<Update> updates;
    for (int step = 0; step < 4; ++step) {
      updates.push_back(MakeUpdate(n, step % 3, &rng));
    }
    std::vector<float> from_device(n);
    std::thread puller([&] {
      ASSERT_TRUE(copy->Upload(host).ok());
      for (size_t u = 0; u < updates.size(); ++u) {
        ASSERT_TRUE(copy->Replay(PlanOf(updates[u]), 0.02f, 1e-4f).ok());
      }
      ASSERT_TRUE(copy->Download(absl::MakeSpan(from_device)).ok());
    });
    puller.join();
    for (const Update& u : updates) {
      ApplyCompressedRange(Sgd(0.02f, 1e-4f), u.chunks, 0, n, host.data(),
                           nullptr, UpdateContext{});
    }
    EXPECT_EQ(FirstDifference(from_device, host), -1) << "copy " << copy_index;
  }
}

// MirrorFromCopy / DownloadMirror / LoadMirroredModel on the GPU: the
// buffer is not written until DownloadMirror brings the copies' values (a
// range at a time), and the model loaded from the mirror computes the same
// gradient as the same values uploaded from host memory; a copy that is not
// the backend's is refused, and so is a download without a mirror or
// outside the model.
TEST(CudaReplayTest, ModelsMirroredFromCopiesLoadDeviceToDevice) {
  SKIP_WITHOUT_CUDA();
  ModelSpec spec;
  spec.feature_dim = 8;
  spec.num_classes = 4;
  spec.layers = {LayerSpec::Dense(16, Activation::kRelu)};
  auto made = CreateCudaBackend(spec, 16, CudaOptions{});
  ASSERT_TRUE(made.ok()) << made.status();
  ModelBackend& backend = **made;
  const int64_t n = ModelParamCount(spec);
  std::mt19937 rng(14);
  const std::vector<float> model = Weights(n, &rng);
  const int64_t half = n / 2;
  auto a = backend.CreateExactCopy(half);
  auto b = backend.CreateExactCopy(n - half);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->Upload({model.data(), static_cast<size_t>(half)}).ok());
  ASSERT_TRUE(
      (*b)->Upload({model.data() + half, static_cast<size_t>(n - half)}).ok());
  std::vector<float> buffer(n, 0.0f);
  ASSERT_TRUE(backend.MirrorFromCopy(absl::MakeSpan(buffer), 0, **a).ok());
  ASSERT_TRUE(backend.MirrorFromCopy(absl::MakeSpan(buffer), half, **b).ok());
  EXPECT_EQ(FirstDifference(buffer, std::vector<float>(n, 0.0f)), -1);
  ASSERT_TRUE(
      backend.DownloadMirror(absl::MakeSpan(buffer), half, n - half).ok());
  EXPECT_EQ(buffer[0], 0.0f);  // the first range is not downloaded yet
  ASSERT_TRUE(backend.DownloadMirror(absl::MakeSpan(buffer), 0, half).ok());
  EXPECT_EQ(FirstDifference(buffer, model), -1);
  std::vector<float> inputs(4 * spec.input_dim());
  for (size_t i = 0; i < inputs.size(); ++i) inputs[i] = 0.1f * (i % 9) - 0.4f;
  const std::vector<int32_t> labels = {0, 1, 2, 3};
  const Batch batch{4, 1, inputs, labels};
  auto gradient = [&] {
    std::vector<float> g(n);
    EXPECT_TRUE(backend.AccumulateGradient(batch).ok());
    EXPECT_TRUE(backend.TakeAverage(absl::MakeSpan(g)).ok());
    return g;
  };
  std::fill(buffer.begin(), buffer.end(), 5.0f);  // the mirror is loaded
  ASSERT_TRUE(backend.LoadMirroredModel(buffer).ok());
  const std::vector<float> mirrored = gradient();
  ASSERT_TRUE(backend.LoadModel(model).ok());
  EXPECT_EQ(FirstDifference(gradient(), mirrored), -1);
  auto host = CreateHostReplayCopy(half);
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(backend.MirrorFromCopy(absl::MakeSpan(buffer), 0, **host).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<float> other(n);
  EXPECT_EQ(backend.LoadMirroredModel(other).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(backend.DownloadMirror(absl::MakeSpan(other), 0, n).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(backend.DownloadMirror(absl::MakeSpan(buffer), 1, n).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
