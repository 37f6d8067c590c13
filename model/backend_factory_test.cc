// CreateBackend on whatever machine and build runs the test: with the CUDA
// plugin and a device, "cuda" and "auto" give the CUDA backend; without a
// device, or in a build without CUDA, "cuda" is kUnavailable with the reason
// and "auto" falls back to the CPU backend and says so.
//
// Built twice: as backend_factory_test against the build's own CUDA
// detection, and as backend_factory_nocuda_test with ASGD_FORCE_NO_CUDA, as
// in a build on a machine without a CUDA toolkit.
#include "model/backend_factory.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/cuda/cuda_loader.h"
#include "model/model_presets.h"

namespace asgd {
namespace {

using ::testing::HasSubstr;

ModelSpec SmallSpec() {
  ModelSpec spec;
  spec.feature_dim = 2;
  spec.context = 1;  // 6 inputs
  spec.layers = {LayerSpec::Dense(5, Activation::kRelu)};
  spec.num_classes = 3;
  return spec;
}

// One step of the backend on a tiny batch: it must actually compute.
void ExpectWorks(ModelBackend& dnn) {
  const ModelSpec& spec = dnn.spec();
  std::vector<float> params = InitialParams(spec, 3);
  std::vector<float> grad(params.size());
  std::vector<float> x(2 * spec.input_dim(), 0.5f);
  std::vector<int32_t> labels = {0, 2};
  auto r = dnn.ComputeGradient(params, Batch{2, 1, x, labels},
                               absl::MakeSpan(grad));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->loss, 0.0);
}

TEST(BackendFactoryTest, CpuAlwaysWorks) {
  std::string note = "stale";
  auto dnn = CreateBackend("cpu", SmallSpec(), 4, &note);
  ASSERT_TRUE(dnn.ok()) << dnn.status();
  EXPECT_EQ((*dnn)->name(), "cpu");
  EXPECT_THAT(note, HasSubstr("CPU backend"));
  ExpectWorks(**dnn);
}

TEST(BackendFactoryTest, AutoUsesCudaOrFallsBackToCpu) {
  std::string note;
  auto dnn = CreateBackend("auto", SmallSpec(), 4, &note);
  ASSERT_TRUE(dnn.ok()) << dnn.status();
  const absl::Status cuda = CudaBackendStatus();
  if (cuda.ok()) {
    EXPECT_EQ((*dnn)->name(), "cuda");
    EXPECT_THAT(note, HasSubstr("CUDA backend"));
  } else {
    EXPECT_EQ((*dnn)->name(), "cpu");
    EXPECT_THAT(note, HasSubstr(CudaBuildStatus().ok()
                                    ? "no CUDA device"
                                    : "built without CUDA support"));
    EXPECT_THAT(note, HasSubstr("falling back to the CPU backend"));
  }
  ExpectWorks(**dnn);
}

TEST(BackendFactoryTest, CudaIsUnavailableWithoutADeviceOrBuild) {
  std::string note = "stale";
  auto dnn = CreateBackend("cuda", SmallSpec(), 4, &note);
  if (CudaBackendStatus().ok()) {
    ASSERT_TRUE(dnn.ok()) << dnn.status();
    EXPECT_EQ((*dnn)->name(), "cuda");
    ExpectWorks(**dnn);
    return;
  }
  EXPECT_EQ(dnn.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(dnn.status().message(), HasSubstr("cannot use the cuda backend"));
  EXPECT_THAT(dnn.status().message(),
              HasSubstr(CudaBuildStatus().ok() ? "no CUDA device"
                                               : "built without CUDA support"));
  EXPECT_EQ(note, "");
}

// What a user of a build without a CUDA toolkit sees for --backend=cuda: the
// build has no CUDA support, and how to get it.
TEST(BackendFactoryTest, ABuildWithoutCudaSaysSoAndHowToGetIt) {
  if (CudaBuildStatus().ok()) {
    GTEST_SKIP() << "this build has CUDA; backend_factory_nocuda_test "
                    "checks the build without it";
  }
  std::string note = "stale";
  auto dnn = CreateBackend("cuda", SmallSpec(), 4, &note);
  EXPECT_EQ(dnn.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(dnn.status().message(), HasSubstr("cannot use the cuda backend"));
  EXPECT_THAT(dnn.status().message(),
              HasSubstr("built without CUDA support"));
  EXPECT_THAT(dnn.status().message(), HasSubstr("install a CUDA toolkit"));
  EXPECT_THAT(dnn.status().message(), HasSubstr("CUDA_HOME"));
  EXPECT_EQ(note, "");
  EXPECT_EQ(CudaBackendStatus().code(), absl::StatusCode::kUnavailable);
}

// Every model kind runs on the CUDA backend where there is one: "cuda" and
// "auto" give it for a CNN, an LSTM and a BLSTM as for a DNN.
TEST(BackendFactoryTest, CudaTakesEveryModelKind) {
  if (!CudaBackendStatus().ok()) {
    GTEST_SKIP() << "no CUDA backend here: " << CudaBackendStatus().message();
  }
  for (const char* kind : {"dnn", "cnn", "lstm", "blstm"}) {
    SCOPED_TRACE(kind);
    ModelShapeOptions shape;
    shape.kind = kind;
    shape.feature_dim = 20;
    shape.context = 2;
    shape.num_classes = 5;
    shape.hidden = "7";
    shape.conv_filters = 2;
    shape.lstm_cells = 6;
    shape.lstm_layers = 1;
    auto spec = PresetModel(shape);
    ASSERT_TRUE(spec.ok()) << spec.status();
    for (const char* name : {"cuda", "auto"}) {
      std::string note;
      auto backend = CreateBackend(name, *spec, 4, &note);
      ASSERT_TRUE(backend.ok()) << name << ": " << backend.status();
      EXPECT_EQ((*backend)->name(), "cuda") << name;
      EXPECT_THAT(note, HasSubstr("CUDA backend"));
      ExpectWorks(**backend);
    }
  }
}

TEST(BackendFactoryTest, UnknownNameListsTheChoices) {
  std::string note;
  auto dnn = CreateBackend("tpu", SmallSpec(), 4, &note);
  EXPECT_EQ(dnn.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(dnn.status().message(), HasSubstr("tpu"));
  EXPECT_THAT(dnn.status().message(), HasSubstr("cpu, cuda, auto"));
}

TEST(BackendFactoryTest, BadSpecIsInvalidArgumentEverywhere) {
  ModelSpec bad = SmallSpec();
  bad.num_classes = 0;
  for (const char* name : {"cpu", "cuda", "auto"}) {
    EXPECT_EQ(CreateBackend(name, bad, 4, nullptr).status().code(),
              absl::StatusCode::kInvalidArgument)
        << name;
    EXPECT_EQ(CreateBackend(name, SmallSpec(), 0, nullptr).status().code(),
              absl::StatusCode::kInvalidArgument)
        << name;
  }
}

// A pipeline stage's layer ranges by backend name: "cpu" always; "cuda"
// where CudaBackendStatus() is OK, else kUnavailable with the reason; "auto"
// either, saying which. The ranges compute: one range over the whole model
// gives the CPU backend's loss (exactly on the CPU).
TEST(BackendFactoryTest, LayerRangesByBackendName) {
  const ModelSpec spec = SmallSpec();
  const std::vector<float> params = InitialParams(spec, 3);
  std::vector<float> x(2 * spec.input_dim(), 0.5f);
  const std::vector<int32_t> labels = {0, 2};
  const Batch batch{2, 1, x, labels};
  auto cpu = CreateBackend("cpu", spec, 4, nullptr);
  ASSERT_TRUE(cpu.ok());
  std::vector<float> want_grad(params.size());
  auto want = (*cpu)->ComputeGradient(params, batch, absl::MakeSpan(want_grad));
  ASSERT_TRUE(want.ok());
  const bool cuda = CudaBackendStatus().ok();
  for (const char* name : {"cpu", "cuda", "auto"}) {
    SCOPED_TRACE(name);
    std::string note = "stale";
    auto factory = LayerRangeFactoryFor(name, CudaOptions{}, &note);
    if (std::string(name) == "cuda" && !cuda) {
      EXPECT_EQ(factory.status().code(), absl::StatusCode::kUnavailable);
      EXPECT_THAT(factory.status().message(),
                  HasSubstr("cannot use the cuda backend"));
      continue;
    }
    ASSERT_TRUE(factory.ok()) << factory.status();
    const bool on_cpu = std::string(name) == "cpu" || !cuda;
    EXPECT_THAT(note, HasSubstr(on_cpu ? "layers on the CPU"
                                       : "layers on CUDA device 0"));
    if (std::string(name) == "auto" && !cuda) {
      EXPECT_THAT(note, HasSubstr(CudaBackendStatus().message()));
    }
    auto range = (*factory)(spec, 0, 2, 4);
    ASSERT_TRUE(range.ok()) << range.status();
    ASSERT_TRUE((*range)->Forward(params.data(), x.data(), 2, 1).ok());
    const BatchResult got = (*range)->Loss(batch);
    std::vector<float> grad(params.size(), -1.0f);
    ASSERT_TRUE((*range)
                    ->Backward(params.data(), x.data(), nullptr, 2, 1,
                               grad.data(), nullptr)
                    .ok());
    if (on_cpu) {
      EXPECT_EQ(got.loss, want->loss);
      EXPECT_EQ(grad, want_grad);
    } else {
      EXPECT_NEAR(got.loss, want->loss, 1e-2 * (1 + want->loss));
    }
    EXPECT_EQ((*factory)(spec, 1, 1, 4).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(LayerRangeFactoryFor("tpu", CudaOptions{}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
