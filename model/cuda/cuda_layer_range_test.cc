// The CUDA plugin's layer ranges (cuda_layer_range.h) against the CPU's
// (model/cpu_layer_range.h, equal bit for bit to the CPU backend): a DNN, a
// CNN, an LSTM (projection, cell clip) and a BLSTM (backend_compare.h's
// models), cut into stages every way, each stage run on the CPU and on the
// device on the same input. Compared per stage, at fp32 GEMMs
// (ToleranceFor(kFp32)): the output rows, the loss and labelled count on
// the last stage, the weights' gradient and the input gradient; the buffers
// the device range writes start as NaN, so anything left unwritten fails.
// Every threshold decision is drawn 1e-3 clear of its threshold
// (MakeCompareBatch). A second minibatch of fewer rows on the same ranges
// checks that nothing of the first is left over. Skips without a CUDA
// device.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/cpu_layer_range.h"
#include "model/cuda/backend_compare.h"
#include "model/cuda/cuda_layer_range.h"
#include "model/cuda/cuda_test_util.h"
#include "model/layer_range.h"

namespace asgd {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

ModelSpec CompareDnn() {
  ModelSpec spec;
  spec.feature_dim = 7;
  spec.context = 1;
  spec.num_classes = 6;
  spec.layers = {LayerSpec::Dense(13, Activation::kRelu),
                 LayerSpec::Dense(9, Activation::kTanh),
                 LayerSpec::Dense(11, Activation::kSigmoid)};
  return spec;
}

// Every |got - want| <= tol * max(1, max |want|), naming `what`.
void ExpectClose(const std::vector<float>& want, const std::vector<float>& got,
                 double tol, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  double scale = 1;
  for (float w : want) scale = std::max(scale, std::fabs(double{w}));
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << " [" << i << "]";
    ASSERT_LE(std::fabs(double{got[i]} - want[i]), tol * scale)
        << what << " [" << i << "]: " << got[i] << " vs " << want[i];
  }
}

struct Stage {
  std::unique_ptr<LayerRange> cpu, gpu;
};

void ExpectRangesAgree(const ModelSpec& spec, const std::string& name) {
  CudaOptions options;
  options.math = CudaOptions::MathMode::kFp32;
  const CompareTolerance tol = ToleranceFor(options.math);
  const bool recurrent = spec.layers.front().kind == LayerKind::kLstm;
  const std::vector<float> params = CompareParams(spec, 5);
  const int n = static_cast<int>(spec.layers.size()) + 1;
  for (int mask = 0; mask < (1 << (n - 1)); ++mask) {
    std::vector<int> bounds = {0};
    for (int i = 1; i < n; ++i) {
      if (mask & (1 << (i - 1))) bounds.push_back(i);
    }
    bounds.push_back(n);
    SCOPED_TRACE(name + " cut " + ::testing::PrintToString(bounds));
    const int max_rows = 12;
    std::vector<Stage> stages;
    for (size_t s = 0; s + 1 < bounds.size(); ++s) {
      Stage st;
      auto cpu = CreateCpuLayerRange(spec, bounds[s], bounds[s + 1], max_rows);
      auto gpu = CreateCudaLayerRange(spec, bounds[s], bounds[s + 1],
                                      max_rows, options);
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      st.cpu = *std::move(cpu);
      st.gpu = *std::move(gpu);
      EXPECT_EQ(st.gpu->param_count(), st.cpu->param_count());
      EXPECT_EQ(st.gpu->in_dim(), st.cpu->in_dim());
      EXPECT_EQ(st.gpu->out_dim(), st.cpu->out_dim());
      stages.push_back(std::move(st));
    }
    // The largest minibatch first, then a smaller one on the same ranges.
    const std::vector<std::pair<int, int>> shapes =
        recurrent ? std::vector<std::pair<int, int>>{{3, 4}, {2, 3}}
                  : std::vector<std::pair<int, int>>{{12, 1}, {5, 1}};
    uint32_t seed = 11;
    for (const auto& [sequences, steps] : shapes) {
      SCOPED_TRACE(::testing::PrintToString(sequences) + " x " +
                   ::testing::PrintToString(steps));
      auto cb = MakeCompareBatch(spec, params, sequences, steps, 1e-3, 0.25,
                                 seed++);
      ASSERT_TRUE(cb.ok()) << cb.status();
      const Batch batch = cb->batch();
      const int64_t rows = cb->rows();
      // Forward: each stage on the CPU stage's previous output, so that
      // every stage is compared on the same input.
      std::vector<std::vector<float>> ins;
      for (size_t s = 0; s < stages.size(); ++s) {
        Stage& st = stages[s];
        ins.push_back(s == 0 ? cb->inputs
                             : std::vector<float>(
                                   stages[s - 1].cpu->out(),
                                   stages[s - 1].cpu->out() +
                                       rows * stages[s - 1].cpu->out_dim()));
        const float* p = params.data() + st.cpu->param_offset();
        ASSERT_TRUE(st.cpu->Forward(p, ins[s].data(), sequences, steps).ok());
        ASSERT_TRUE(st.gpu->Forward(p, ins[s].data(), sequences, steps).ok());
        const std::vector<float> want(st.cpu->out(),
                                      st.cpu->out() + rows * st.cpu->out_dim());
        const std::vector<float> got(st.gpu->out(),
                                     st.gpu->out() + rows * st.gpu->out_dim());
        ExpectClose(want, got, tol.logp, "forward out");
      }
      const BatchResult want_loss = stages.back().cpu->Loss(batch);
      const BatchResult got_loss = stages.back().gpu->Loss(batch);
      EXPECT_EQ(got_loss.labelled, want_loss.labelled);
      EXPECT_LE(std::fabs(got_loss.loss - want_loss.loss),
                tol.loss * (1 + std::fabs(want_loss.loss)));
      // Backward: each stage from the CPU's next stage's input gradient.
      std::vector<float> dout;
      for (int s = static_cast<int>(stages.size()) - 1; s >= 0; --s) {
        Stage& st = stages[s];
        const float* p = params.data() + st.cpu->param_offset();
        const bool first = s == 0;
        std::vector<float> want_dp(st.cpu->param_count());
        std::vector<float> got_dp(st.cpu->param_count(), kNaN);
        std::vector<float> want_din(first ? 0 : rows * st.cpu->in_dim());
        std::vector<float> got_din(want_din.size(), kNaN);
        const float* d = st.cpu->has_loss() ? nullptr : dout.data();
        ASSERT_TRUE(st.cpu
                        ->Backward(p, ins[s].data(), d, sequences, steps,
                                   want_dp.data(),
                                   first ? nullptr : want_din.data())
                        .ok());
        ASSERT_TRUE(st.gpu
                        ->Backward(p, ins[s].data(), d, sequences, steps,
                                   got_dp.data(),
                                   first ? nullptr : got_din.data())
                        .ok());
        ExpectClose(want_dp, got_dp, tol.grad, "weights' gradient");
        ExpectClose(want_din, got_din, tol.grad, "input gradient");
        dout = std::move(want_din);
      }
    }
  }
}

TEST(CudaLayerRangeTest, DnnStagesMatchTheCpu) {
  SKIP_WITHOUT_CUDA();
  ExpectRangesAgree(CompareDnn(), "dnn");
}

TEST(CudaLayerRangeTest, CnnStagesMatchTheCpu) {
  SKIP_WITHOUT_CUDA();
  ExpectRangesAgree(CompareCnn(Activation::kRelu), "cnn");
}

TEST(CudaLayerRangeTest, LstmAndBlstmStagesMatchTheCpu) {
  SKIP_WITHOUT_CUDA();
  ExpectRangesAgree(CompareLstm(), "lstm");
  ExpectRangesAgree(CompareBlstm(), "blstm");
}

TEST(CudaLayerRangeTest, RefusesBadRangesAndDevices) {
  SKIP_WITHOUT_CUDA();
  const ModelSpec spec = CompareDnn();
  CudaOptions options;
  EXPECT_EQ(CreateCudaLayerRange(spec, 2, 2, 4, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateCudaLayerRange(spec, 0, 5, 4, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateCudaLayerRange(spec, 0, 1, 0, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.device = 1000;
  EXPECT_EQ(CreateCudaLayerRange(spec, 0, 1, 4, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
