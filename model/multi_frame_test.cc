// A multi-frame model (ModelSpec::output_frames > 1) on the CPU backend: its
// gradient against finite differences; every head a softmax of its own,
// whose loss, log-posteriors and predictions agree; a head without labels
// leaves the model computing what the one-frame model computes; and the
// batch checks count output_frames labels per row.
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "model/cpu_backend.h"
#include "model/loss_gradient_check.h"

namespace asgd {
namespace {

constexpr int kHeads = 3;

ModelSpec Tiny(int output_frames) {
  ModelSpec spec;
  spec.feature_dim = 4;
  spec.context = 1;  // 12 inputs
  spec.layers = {LayerSpec::Dense(9, Activation::kTanh),
                 LayerSpec::Dense(6, Activation::kSigmoid)};
  spec.num_classes = 5;
  spec.output_frames = output_frames;
  return spec;
}

std::vector<float> RandomInputs(const ModelSpec& spec, int rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(int64_t{rows} * spec.input_dim());
  for (float& v : x) v = u(rng);
  return x;
}

TEST(MultiFrameTest, GradientMatchesFiniteDifferences) {
  const ModelSpec spec = Tiny(kHeads);
  auto backend = CreateCpuBackend(spec, 6);
  ASSERT_TRUE(backend.ok()) << backend.status();
  const std::vector<float> params = InitialParams(spec, 2);
  const std::vector<float> inputs = RandomInputs(spec, 6, 3);
  std::vector<int32_t> labels(6 * kHeads);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = (i * 7) % 5;
  labels[2] = kNoLabel;  // row 0's last head: past its utterance's end
  labels[4] = labels[5] = kNoLabel;
  const Batch batch{6, 1, inputs, labels};
  std::vector<float> grad(params.size());
  auto r = (*backend)->ComputeGradient(params, batch, absl::MakeSpan(grad));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->labelled, 6 * kHeads - 3);
  LossGradientOptions o;
  o.atol = 1e-3;
  o.stride = 2;
  const LossGradientReport check =
      CheckLossGradient(**backend, params, batch, grad, o);
  EXPECT_GT(check.checked, 100);
  EXPECT_EQ(check.failures, 0) << check.first_failure;
}

TEST(MultiFrameTest, EveryHeadIsASoftmaxOfItsOwn) {
  const ModelSpec spec = Tiny(kHeads);
  const int c = spec.num_classes, rows = 4;
  auto backend = CreateCpuBackend(spec, rows);
  ASSERT_TRUE(backend.ok());
  const std::vector<float> params = InitialParams(spec, 4);
  const std::vector<float> inputs = RandomInputs(spec, rows, 5);
  std::vector<int32_t> labels(rows * kHeads);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = (i * 3 + 1) % c;
  labels[7] = kNoLabel;
  const Batch batch{rows, 1, inputs, labels};
  std::vector<float> logp(rows * kHeads * c);
  std::vector<int32_t> argmax(rows * kHeads);
  ASSERT_TRUE((*backend)->LogPosteriors(params, batch, absl::MakeSpan(logp)).ok());
  ASSERT_TRUE((*backend)->Predict(params, batch, absl::MakeSpan(argmax)).ok());
  double loss = 0;
  int labelled = 0, correct = 0;
  for (int h = 0; h < rows * kHeads; ++h) {
    const float* row = logp.data() + h * c;
    double sum = 0;
    int best = 0;
    for (int k = 0; k < c; ++k) {
      sum += std::exp(row[k]);
      if (row[k] > row[best]) best = k;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "head " << h;
    EXPECT_EQ(argmax[h], best) << "head " << h;
    if (labels[h] == kNoLabel) continue;
    loss -= row[labels[h]];
    ++labelled;
    correct += best == labels[h];
  }
  std::vector<float> grad(params.size());
  auto r = (*backend)->ComputeGradient(params, batch, absl::MakeSpan(grad));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->labelled, labelled);
  EXPECT_EQ(r->correct, correct);
  EXPECT_NEAR(r->loss, loss / labelled, 1e-5);
}

// Heads 1 and 2 unlabelled: head 0 is the one-frame model, whose output
// weights it has; heads 1 and 2 get no gradient at all.
TEST(MultiFrameTest, AHeadWithoutLabelsLeavesTheOneFrameModel) {
  const ModelSpec one = Tiny(1), multi = Tiny(kHeads);
  const int c = one.num_classes, rows = 5;
  const std::vector<float> p1 = InitialParams(one, 6);
  std::vector<float> pm = InitialParams(multi, 7);
  const int out = static_cast<int>(one.layers.size());
  const int64_t hidden = LayerParamOffset(one, out);
  const int in = LayerInputShape(one, out).dim();
  std::copy(p1.begin(), p1.begin() + hidden, pm.begin());  // hidden layers
  // Head 0's weight rows and biases.
  std::copy(p1.begin() + hidden, p1.begin() + hidden + int64_t{c} * in,
            pm.begin() + hidden);
  const int64_t bias1 = hidden + int64_t{c} * in;
  const int64_t biasm = hidden + int64_t{kHeads} * c * in;
  std::copy(p1.begin() + bias1, p1.begin() + bias1 + c, pm.begin() + biasm);

  const std::vector<float> inputs = RandomInputs(one, rows, 8);
  std::vector<int32_t> l1(rows), lm(rows * kHeads, kNoLabel);
  for (int i = 0; i < rows; ++i) lm[i * kHeads] = l1[i] = (2 * i + 1) % c;
  auto b1 = CreateCpuBackend(one, rows);
  auto bm = CreateCpuBackend(multi, rows);
  ASSERT_TRUE(b1.ok() && bm.ok());
  std::vector<float> g1(p1.size()), gm(pm.size());
  auto r1 = (*b1)->ComputeGradient(p1, Batch{rows, 1, inputs, l1},
                                   absl::MakeSpan(g1));
  auto rm = (*bm)->ComputeGradient(pm, Batch{rows, 1, inputs, lm},
                                   absl::MakeSpan(gm));
  ASSERT_TRUE(r1.ok() && rm.ok());
  EXPECT_EQ(rm->labelled, rows);
  EXPECT_NEAR(rm->loss, r1->loss, 1e-6);
  EXPECT_EQ(rm->correct, r1->correct);
  for (int64_t j = 0; j < bias1; ++j) ASSERT_NEAR(gm[j], g1[j], 1e-6) << j;
  for (int64_t j = hidden + int64_t{c} * in; j < biasm; ++j) {
    ASSERT_EQ(gm[j], 0.0f) << "weight of head 1 or 2, element " << j;
  }
  for (int k = 0; k < c; ++k) ASSERT_NEAR(gm[biasm + k], g1[bias1 + k], 1e-6);
  for (int k = c; k < kHeads * c; ++k) ASSERT_EQ(gm[biasm + k], 0.0f) << k;

  std::vector<float> lp1(rows * c), lpm(rows * kHeads * c);
  ASSERT_TRUE((*b1)->LogPosteriors(p1, Batch{rows, 1, inputs, l1},
                                   absl::MakeSpan(lp1)).ok());
  ASSERT_TRUE((*bm)->LogPosteriors(pm, Batch{rows, 1, inputs, lm},
                                   absl::MakeSpan(lpm)).ok());
  for (int i = 0; i < rows; ++i) {
    for (int k = 0; k < c; ++k) {
      ASSERT_NEAR(lpm[(i * kHeads) * c + k], lp1[i * c + k], 1e-5) << i;
    }
  }
}

TEST(MultiFrameTest, BatchesNeedALabelPerHead) {
  const ModelSpec spec = Tiny(kHeads);
  auto backend = CreateCpuBackend(spec, 4);
  ASSERT_TRUE(backend.ok());
  const std::vector<float> params = InitialParams(spec, 4);
  const std::vector<float> inputs = RandomInputs(spec, 4, 5);
  std::vector<float> grad(params.size());
  auto gradient = [&](const std::vector<int32_t>& labels) {
    return (*backend)
        ->ComputeGradient(params, Batch{4, 1, inputs, labels},
                          absl::MakeSpan(grad))
        .status();
  };
  std::vector<int32_t> labels(4 * kHeads, 1);
  EXPECT_TRUE(gradient(labels).ok());
  EXPECT_EQ(gradient(std::vector<int32_t>(4, 1)).code(),
            absl::StatusCode::kInvalidArgument);  // one label per row
  labels[7] = spec.num_classes;  // row 2, head 1
  const absl::Status bad = gradient(labels);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("row 2 head 1"), absl::string_view::npos)
      << bad;
  // Outputs: output_frames predictions and output_dim() log-posteriors a row.
  std::vector<int32_t> argmax(4);
  EXPECT_EQ((*backend)
                ->Predict(params, Batch{4, 1, inputs, {}}, absl::MakeSpan(argmax))
                .code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<float> logp(4 * spec.num_classes);
  EXPECT_EQ((*backend)
                ->LogPosteriors(params, Batch{4, 1, inputs, {}},
                                absl::MakeSpan(logp))
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
