// MirroredPullSink over the default backend mirrors (host vectors), with
// copies made by CreateHostReplayCopy: slices committed from copies reach
// the mirror and, only when downloaded, the buffer; the model loaded from
// the mirror is the copies' even after the buffer was written; a slice
// committed as weights makes the buffer unmirrored and needs no download;
// the backend's checks.
#include "worker/ps/mirrored_pull_sink.h"

#include <algorithm>
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
  // The buffer is not written until the model is downloaded.
  EXPECT_EQ(buffer, std::vector<float>(n, 0.0f));
  EXPECT_EQ(sink.pending(), n);
  ASSERT_TRUE(sink.Download().ok());
  EXPECT_EQ(buffer, pulled);
  EXPECT_EQ(sink.pending(), 0);
  EXPECT_TRUE(sink.mirrored());  // and still loadable from the mirror

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

// A pull that came partly as weights and partly from a copy: downloading
// brings only the copy's slice, over whatever the buffer held there, and
// leaves the slice that came as weights as it was committed.
TEST(MirroredPullSinkTest, DownloadBringsOnlyTheSlicesFromCopies) {
  auto backend = *CreateCpuBackend(Spec(), 4);
  const int64_t n = ModelParamCount(Spec());
  std::vector<float> buffer(n, 0.0f);
  MirroredPullSink sink(backend.get(), absl::MakeSpan(buffer));
  const FlatRange first{0, 10}, second{10, n};
  auto a = CopyOf(std::vector<float>(10, 1.0f));
  auto b = CopyOf(std::vector<float>(n - 10, 2.0f));
  // First pull: both slices from copies, downloaded.
  ASSERT_TRUE(sink.CommitCopy(first, *a).ok());
  ASSERT_TRUE(sink.CommitCopy(second, *b).ok());
  ASSERT_TRUE(sink.Download().ok());
  // Second pull: the first slice as weights (decoded into the staging
  // buffer, which is the buffer), the second from a newer copy.
  absl::Span<float> staging = sink.Staging(first);
  std::fill(staging.begin(), staging.end(), 3.0f);
  ASSERT_TRUE(sink.Commit(first).ok());
  ASSERT_TRUE(b->Upload(std::vector<float>(n - 10, 4.0f)).ok());
  ASSERT_TRUE(sink.CommitCopy(second, *b).ok());
  EXPECT_FALSE(sink.mirrored());
  EXPECT_EQ(sink.pending(), n - 10);
  EXPECT_EQ(buffer[10], 2.0f);  // the first pull's, until downloaded
  ASSERT_TRUE(sink.Download().ok());
  std::vector<float> expected(n, 4.0f);
  std::fill(expected.begin(), expected.begin() + 10, 3.0f);
  EXPECT_EQ(buffer, expected);
  // Through MirroredBuffers, by the buffer's memory: nothing left to do,
  // and a buffer without a sink needs nothing.
  MirroredBuffers buffers(backend.get());
  std::vector<float> other(n, 5.0f);
  ASSERT_NE(buffers.For(absl::MakeSpan(buffer)), nullptr);
  ASSERT_TRUE(buffers.For(absl::MakeSpan(buffer))->CommitCopy(second, *b).ok());
  std::fill(buffer.begin() + 10, buffer.end(), 0.0f);
  ASSERT_TRUE(buffers.Download(buffer).ok());
  EXPECT_EQ(buffer, expected);
  ASSERT_TRUE(buffers.Download(other).ok());
  EXPECT_EQ(other, std::vector<float>(n, 5.0f));
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
  EXPECT_EQ(backend->DownloadMirror(absl::MakeSpan(buffer), 0, n).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(backend->MirrorFromCopy(absl::MakeSpan(buffer), 0, *copy).ok());
  EXPECT_EQ(backend->DownloadMirror(absl::MakeSpan(small), 0, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend->DownloadMirror(absl::MakeSpan(buffer), n - 9, 10).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend->DownloadMirror(absl::MakeSpan(buffer), -1, 2).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend->DownloadMirror(absl::MakeSpan(buffer), 0, -1).code(),
            absl::StatusCode::kInvalidArgument);
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
