// The CPU DNN against a plain double-precision reference: the forward loss
// and predictions, and every gradient element against central finite
// differences of the reference loss.
#include "worker/dnn.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace asgd {
namespace {

// Naive reference: mean cross-entropy of the batch, in double.
double ReferenceLoss(const DnnSpec& spec, const std::vector<double>& params,
                     const std::vector<float>& x,
                     const std::vector<int32_t>& labels,
                     std::vector<int>* argmax = nullptr) {
  const int n = labels.size();
  double total = 0;
  for (int i = 0; i < n; ++i) {
    std::vector<double> a(x.begin() + i * spec.input_dim,
                          x.begin() + (i + 1) * spec.input_dim);
    size_t offset = 0;
    for (int l = 0; l < spec.num_layers(); ++l) {
      const int in = spec.layer_in(l), out = spec.layer_out(l);
      std::vector<double> z(out);
      for (int o = 0; o < out; ++o) {
        double s = params[offset + in * out + o];  // bias
        for (int k = 0; k < in; ++k) s += params[offset + o * in + k] * a[k];
        z[o] = s;
      }
      offset += in * out + out;
      if (l + 1 < spec.num_layers()) {
        for (double& v : z) {
          v = spec.activation == Activation::kRelu ? std::max(v, 0.0)
                                                   : 1.0 / (1.0 + std::exp(-v));
        }
      }
      a = z;
    }
    double mx = a[0];
    int best = 0;
    for (int k = 0; k < (int)a.size(); ++k) {
      if (a[k] > mx) mx = a[k], best = k;
    }
    double sum = 0;
    for (double v : a) sum += std::exp(v - mx);
    total += -(a[labels[i]] - mx - std::log(sum));
    if (argmax) argmax->push_back(best);
  }
  return total / n;
}

class DnnTest : public ::testing::TestWithParam<Activation> {};

TEST_P(DnnTest, GradientMatchesFiniteDifferences) {
  DnnSpec spec;
  spec.input_dim = 7;
  spec.hidden = {6, 5};
  spec.num_classes = 4;
  spec.activation = GetParam();
  const int n = 9;
  auto dnn = CreateCpuDnn(spec, n);
  ASSERT_TRUE(dnn.ok()) << dnn.status();
  std::vector<float> params = InitialDnnParams(spec, 11);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (float& p : params) p += 0.1f * normal(rng);  // non-zero biases too
  std::vector<float> x(n * spec.input_dim);
  for (float& v : x) v = normal(rng);
  std::vector<int32_t> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = i % spec.num_classes;

  std::vector<float> grad(params.size());
  auto result = (*dnn)->ComputeGradient(params, x, labels, absl::MakeSpan(grad));
  ASSERT_TRUE(result.ok()) << result.status();

  std::vector<double> p64(params.begin(), params.end());
  std::vector<int> argmax;
  const double ref_loss = ReferenceLoss(spec, p64, x, labels, &argmax);
  EXPECT_NEAR(result->loss, ref_loss, 1e-5 * (1 + ref_loss));
  int ref_correct = 0;
  for (int i = 0; i < n; ++i) ref_correct += argmax[i] == labels[i];
  EXPECT_EQ(result->correct, ref_correct);

  const double h = 1e-5;
  double max_err = 0;
  for (size_t j = 0; j < params.size(); ++j) {
    std::vector<double> plus = p64, minus = p64;
    plus[j] += h;
    minus[j] -= h;
    const double fd = (ReferenceLoss(spec, plus, x, labels) -
                       ReferenceLoss(spec, minus, x, labels)) /
                      (2 * h);
    const double err = std::abs(fd - grad[j]) / std::max(1e-3, std::abs(fd));
    max_err = std::max(max_err, err);
    ASSERT_LT(err, 2e-3) << "param " << j << " fd " << fd << " got " << grad[j];
  }
  RecordProperty("max_relative_error", std::to_string(max_err));

  std::vector<int32_t> predicted(n);
  ASSERT_TRUE((*dnn)->Predict(params, x, absl::MakeSpan(predicted)).ok());
  for (int i = 0; i < n; ++i) EXPECT_EQ(predicted[i], argmax[i]);
}

INSTANTIATE_TEST_SUITE_P(Activations, DnnTest,
                         ::testing::Values(Activation::kRelu,
                                           Activation::kSigmoid));

TEST(DnnTest, RejectsBadInput) {
  DnnSpec spec;
  spec.input_dim = 3;
  spec.hidden = {2};
  spec.num_classes = 2;
  auto dnn = CreateCpuDnn(spec, 4);
  ASSERT_TRUE(dnn.ok());
  std::vector<float> params(DnnParamCount(spec)), grad(params.size());
  std::vector<float> x(2 * 3);
  EXPECT_EQ((*dnn)->ComputeGradient(params, x, {0, 2}, absl::MakeSpan(grad)).status().code(),
            absl::StatusCode::kInvalidArgument);  // label out of range
  EXPECT_FALSE((*dnn)->ComputeGradient(params, x, {0}, absl::MakeSpan(grad)).ok());  // size
  std::vector<int32_t> labels(5, 0);
  std::vector<float> x5(5 * 3);
  EXPECT_FALSE((*dnn)->ComputeGradient(params, x5, labels, absl::MakeSpan(grad)).ok());
  EXPECT_FALSE(CreateCpuDnn(spec, 0).ok());
}

}  // namespace
}  // namespace asgd
