// Whole models of the new layer kinds through the CPU backend: the gradient
// of the mean cross-entropy by finite differences on a sample of parameters
// of every layer, with unlabelled rows in the batch, for a small CNN and a
// small BLSTM; unlabelled rows take no part in the loss (it is the mean of
// -log p(label) over the labelled rows alone).
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/backend.h"
#include "model/cpu_backend.h"
#include "model/loss_gradient_check.h"
#include "model/model_spec.h"

namespace asgd {
namespace {

ModelSpec SmallCnn() {
  ModelSpec spec;
  spec.feature_dim = 8;
  spec.context = 2;  // 5 x 8 inputs
  ConvLayerSpec c1;
  c1.filters = 3;
  c1.kernel_time = 2;
  c1.kernel_freq = 3;
  c1.pool_time = 1;
  c1.pool_freq = 2;
  c1.activation = Activation::kTanh;
  ConvLayerSpec c2;
  c2.filters = 4;
  c2.kernel_time = 2;
  c2.kernel_freq = 2;
  c2.pool_time = 2;
  c2.pool_freq = 1;
  c2.activation = Activation::kSigmoid;
  spec.layers = {LayerSpec::Conv(c1), LayerSpec::Conv(c2),
                 LayerSpec::Dense(6, Activation::kTanh)};
  spec.num_classes = 4;
  return spec;
}

ModelSpec SmallBlstm() {
  ModelSpec spec;
  spec.feature_dim = 5;
  spec.context = 0;
  LstmLayerSpec l1;
  l1.cells = 4;
  l1.projection = 3;
  l1.cell_clip = 3.0f;
  l1.bidirectional = true;
  LstmLayerSpec l2;
  l2.cells = 3;
  l2.bidirectional = true;
  spec.layers = {LayerSpec::Lstm(l1), LayerSpec::Lstm(l2)};
  spec.num_classes = 4;
  return spec;
}

struct Data {
  int sequences, steps;
  std::vector<float> inputs;
  std::vector<int32_t> labels;
  Batch batch() const { return Batch{sequences, steps, inputs, labels}; }
};

// Random inputs; labels cycle through the classes, except that `unlabelled`
// rows get kNoLabel.
Data RandomData(const ModelSpec& spec, int sequences, int steps,
                const std::vector<int>& unlabelled, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  Data d{sequences, steps, {}, {}};
  const int rows = sequences * steps;
  d.inputs.resize(int64_t{rows} * spec.input_dim());
  for (float& x : d.inputs) x = u(rng);
  for (int i = 0; i < rows; ++i) d.labels.push_back((i * 7 + 1) % spec.num_classes);
  for (int i : unlabelled) d.labels[i] = kNoLabel;
  return d;
}

// Central differences of the mean loss on about `samples` parameters spread
// over the whole model.
LossGradientReport CheckGradient(ModelBackend& b,
                                 const std::vector<float>& params,
                                 const Batch& batch,
                                 const std::vector<float>& grad, double h,
                                 double atol, int samples) {
  LossGradientOptions o;
  o.step = h;
  o.atol = atol;
  o.stride = std::max<size_t>(1, params.size() / samples);
  o.first = o.stride / 2;
  return CheckLossGradient(b, params, batch, grad, o);
}

// The loss as the mean over labelled rows of -log p(label), from
// LogPosteriors, which reads no labels.
double LossFromPosteriors(ModelBackend& b, const std::vector<float>& params,
                          const Data& d) {
  const int c = b.spec().num_classes;
  std::vector<float> logp(d.labels.size() * c);
  EXPECT_TRUE(b.LogPosteriors(params, d.batch(), absl::MakeSpan(logp)).ok());
  double sum = 0;
  int labelled = 0;
  for (size_t i = 0; i < d.labels.size(); ++i) {
    if (d.labels[i] == kNoLabel) continue;
    sum -= logp[i * c + d.labels[i]];
    ++labelled;
  }
  return sum / labelled;
}

TEST(ModelGradientTest, CnnGradientMatchesFiniteDifferences) {
  const ModelSpec spec = SmallCnn();
  auto backend = CreateCpuBackend(spec, 6);
  ASSERT_TRUE(backend.ok()) << backend.status();
  std::vector<float> params = InitialParams(spec, 3);
  const Data d = RandomData(spec, 6, 1, {1, 4}, 5);
  std::vector<float> grad(params.size());
  auto r = (*backend)->ComputeGradient(params, d.batch(), absl::MakeSpan(grad));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->labelled, 4);
  EXPECT_NEAR(r->loss, LossFromPosteriors(**backend, params, d), 1e-5);
  // A small step, as max-pooling has kinks (see conv_test.cc), and an atol
  // for the float noise it brings.
  const LossGradientReport check =
      CheckGradient(**backend, params, d.batch(), grad, 1e-4, 2e-3, 150);
  EXPECT_EQ(check.failures, 0) << check.first_failure;

  // The unlabelled rows change nothing: the same gradient without them.
  Data labelled = RandomData(spec, 4, 1, {}, 5);
  for (int i = 0, k = 0; i < 6; ++i) {
    if (d.labels[i] == kNoLabel) continue;
    std::copy_n(d.inputs.begin() + i * spec.input_dim(), spec.input_dim(),
                labelled.inputs.begin() + k * spec.input_dim());
    labelled.labels[k++] = d.labels[i];
  }
  std::vector<float> grad4(params.size());
  auto r4 = (*backend)->ComputeGradient(params, labelled.batch(),
                                        absl::MakeSpan(grad4));
  ASSERT_TRUE(r4.ok());
  EXPECT_NEAR(r4->loss, r->loss, 1e-6);
  for (size_t j = 0; j < grad.size(); ++j) ASSERT_NEAR(grad[j], grad4[j], 1e-6) << j;
}

TEST(ModelGradientTest, BlstmGradientMatchesFiniteDifferences) {
  const ModelSpec spec = SmallBlstm();
  const int sequences = 3, steps = 5;
  auto backend = CreateCpuBackend(spec, sequences * steps);
  ASSERT_TRUE(backend.ok()) << backend.status();
  std::vector<float> params = InitialParams(spec, 4);
  // The first and last step of every sequence are context only (rows are
  // time-major: step t of sequence b is row t * sequences + b).
  const Data d = RandomData(spec, sequences, steps, {0, 1, 2, 12, 13, 14}, 6);
  std::vector<float> grad(params.size());
  auto r = (*backend)->ComputeGradient(params, d.batch(), absl::MakeSpan(grad));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->labelled, 9);
  EXPECT_NEAR(r->loss, LossFromPosteriors(**backend, params, d), 1e-5);
  const LossGradientReport check =
      CheckGradient(**backend, params, d.batch(), grad, 1e-2, 1e-3, 200);
  EXPECT_EQ(check.failures, 0) << check.first_failure;
}

}  // namespace
}  // namespace asgd
