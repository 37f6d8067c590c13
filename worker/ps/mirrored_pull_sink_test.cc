// MirroredPullSink over the default backend mirrors (host vectors), with
// copies made by CreateHostReplayCopy: slices committed from copies reach
// the buffer and the mirror, and the model loaded from the mirror is the
// copies' even after the buffer was written; a slice committed as weights
// makes the buffer unmirrored; the backend's checks.
#include "worker/ps/mirrored_pull_sink.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "model/cpu_backend.h"
#include "model/cuda/host_replay_copy.h"

namespace asgd {
namespace {

ModelSpec Spec() {
  ModelSpec spec;
  spec.feature_dim = 3;
  spec.num_classes = 2;
  spec.layers = {LayerSpec::Dense(4, Activation::kRelu)};
  return spec;
}

std::unique_ptr<ExactCopy> CopyOf(const std::vector<float>& values) {
  std::unique_ptr<ExactCopy> copy =
      *CreateHostReplayCopy(static_cast<int64_t>(values.size()));
  EXPECT_TRUE(copy->Upload(values).ok());
  return copy;
}

// The gradient of one fixed batch at the backend's resident model.
std::vector<float> ResidentGradient(ModelBackend* backend, int64_t n) {
  std::vector<float> inputs(2 * Spec().input_dim());
  for (size_t i = 0; i < inputs.size(); ++i) inputs[i] = 0.3f * (i % 5) - 0.6f;
  const std::vector<int32_t> labels = {1, 0};
  Batch batch{2, 1, inputs, labels};
  EXPECT_TRUE(backend->AccumulateGradient(batch).ok());
  std::vector<float> grad(n);
  EXPECT_TRUE(backend->TakeAverage(absl::MakeSpan(grad)).ok());
  return grad;
}

TEST(MirroredPullSinkTest, SlicesFromCopiesLoadFromTheMirror) {
  auto backend = *CreateCpuBackend(Spec(), 4);
  const int64_t n = ModelParamCount(Spec());
  std::vector<float> pulled(n), buffer(n, 0.0f);
  for (int64_t i = 0; i < n; ++i) pulled[i] = 0.1f * (i % 7) - 0.3f;
  const FlatRange first{0, 10}, second{10, n};
  MirroredPullSink sink(backend.get(), absl::MakeSpan(buffer));
  EXPECT_FALSE(sink.mirrored());
  auto a = CopyOf({pulled.begin(), pulled.begin() + 10});
  auto b = CopyOf({pulled.begin() + 10, pulled.end()});
  ASSERT_TRUE(sink.CommitCopy(first, *a).ok());
  EXPECT_FALSE(sink.mirrored());  // half of it
  ASSERT_TRUE(sink.CommitCopy(second, *b).ok());
  EXPECT_TRUE(sink.mirrored());
  EXPECT_EQ(buffer, pulled);  // downloaded into the buffer too

  // The mirror, not the buffer, is what LoadMirroredModel loads.
  std::fill(buffer.begin(), buffer.end(), 9.0f);
  ASSERT_TRUE(backend->LoadMirroredModel(buffer).ok());
  const std::vector<float> from_mirror = ResidentGradient(backend.get(), n);
  ASSERT_TRUE(backend->LoadModel(pulled).ok());
  EXPECT_EQ(from_mirror, ResidentGradient(backend.get(), n));
  ASSERT_TRUE(backend->LoadModel(buffer).ok());
  EXPECT_NE(from_mirror, ResidentGradient(backend.get(), n));

  // A slice that comes as weights leaves the buffer unmirrored, until the
  // next pull brings it from a copy again.
  ASSERT_TRUE(sink.Commit(second).ok());
  EXPECT_FALSE(sink.mirrored());
  ASSERT_TRUE(sink.CommitCopy(second, *b).ok());
  EXPECT_TRUE(sink.mirrored());
}

TEST(MirroredPullSinkTest, TheBackendChecksItsArguments) {
  auto backend = *CreateCpuBackend(Spec(), 4);
  const int64_t n = ModelParamCount(Spec());
  std::vector<float> buffer(n), small(n - 1);
  auto copy = CopyOf(std::vector<float>(10, 1.0f));
  EXPECT_EQ(backend->MirrorFromCopy(absl::MakeSpan(small), 0, *copy).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend->MirrorFromCopy(absl::MakeSpan(buffer), n - 9, *copy)
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend->MirrorFromCopy(absl::MakeSpan(buffer), -1, *copy).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend->LoadMirroredModel(buffer).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(backend->LoadMirroredModel(small).code(),
            absl::StatusCode::kInvalidArgument);
  // A copy of another size than the sink's range.
  MirroredPullSink sink(backend.get(), absl::MakeSpan(buffer));
  EXPECT_EQ(sink.CommitCopy(FlatRange{0, 11}, *copy).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(sink.mirrored());
}

}  // namespace
}  // namespace asgd
