// The LSTM layer: forward against a plain double-precision loop (with and
// without projection, clipping that clips, one and two directions, one step
// and several, one sequence and several), backward by finite differences of
// that loop and by the float check of gradient_check.h.
#include "model/layers/lstm.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "model/layers/gradient_check.h"
#include "model/layers/layer.h"

namespace asgd {
namespace {

double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

// The layer as model_spec.h defines it, one sequence and one step at a time,
// in double. x and the result are time-major rows (row t * sequences + b).
// Counts in *clipped the cell values the clip changed, in *cells all.
std::vector<double> ReferenceLstm(const LstmLayerSpec& s, int in_dim,
                                  const double* params, const double* x,
                                  int sequences, int steps, int* clipped,
                                  int* cells) {
  const int n = s.cells, rec = s.projection > 0 ? s.projection : s.cells;
  const int dirs = s.bidirectional ? 2 : 1, out_dim = dirs * rec;
  const int64_t per_dir = int64_t{4} * n * (in_dim + rec + 1) +
                          int64_t{s.projection} * n;
  std::vector<double> out(int64_t{sequences} * steps * out_dim);
  for (int d = 0; d < dirs; ++d) {
    const double* w_x = params + d * per_dir;
    const double* w_r = w_x + 4 * n * in_dim;
    const double* bias = w_r + 4 * n * rec;
    const double* w_p = bias + 4 * n;
    for (int b = 0; b < sequences; ++b) {
      std::vector<double> c(n, 0.0), h(n), r(rec, 0.0), a(4 * n);
      for (int k = 0; k < steps; ++k) {
        const int t = d == 0 ? k : steps - 1 - k;
        const double* xt = x + (int64_t{t} * sequences + b) * in_dim;
        for (int g = 0; g < 4 * n; ++g) {
          a[g] = bias[g];
          for (int j = 0; j < in_dim; ++j) a[g] += w_x[g * in_dim + j] * xt[j];
          for (int j = 0; j < rec; ++j) a[g] += w_r[g * rec + j] * r[j];
        }
        for (int j = 0; j < n; ++j) {
          const double i = Sigmoid(a[j]), f = Sigmoid(a[n + j]);
          const double g = std::tanh(a[2 * n + j]), o = Sigmoid(a[3 * n + j]);
          double cell = f * c[j] + i * g;
          ++*cells;
          if (s.cell_clip > 0 && std::abs(cell) > s.cell_clip) {
            cell = cell > 0 ? s.cell_clip : -s.cell_clip;
            ++*clipped;
          }
          c[j] = cell;
          h[j] = o * std::tanh(cell);
        }
        for (int j = 0; j < rec; ++j) {
          if (s.projection > 0) {
            r[j] = 0;
            for (int m = 0; m < n; ++m) r[j] += w_p[j * n + m] * h[m];
          } else {
            r[j] = h[j];
          }
          out[(int64_t{t} * sequences + b) * out_dim + d * rec + j] = r[j];
        }
      }
    }
  }
  return out;
}

struct Variant {
  LstmLayerSpec lstm;
  int in_dim;
  int sequences;
  int steps;
  double input_scale;  // inputs uniform in ±input_scale
};

LstmLayerSpec Lstm(int cells, int projection, float clip, bool bidirectional) {
  LstmLayerSpec s;
  s.cells = cells;
  s.projection = projection;
  s.cell_clip = clip;
  s.bidirectional = bidirectional;
  return s;
}

std::vector<Variant> Variants() {
  return {
      {Lstm(5, 0, 0, false), 7, 3, 4, 1},
      {Lstm(6, 3, 0, false), 4, 2, 5, 1},
      // Large inputs and a low clip: a good part of the cells clip.
      {Lstm(4, 0, 0.4f, false), 5, 2, 6, 2},
      {Lstm(5, 3, 0.5f, true), 6, 3, 4, 2},
      {Lstm(4, 0, 0, true), 3, 2, 3, 1},
      // One step: no recurrence.
      {Lstm(4, 0, 0, true), 5, 1, 1, 1},
      {Lstm(5, 2, 0, false), 4, 4, 1, 1},
  };
}

// A one-layer model around the variant (what CheckLayerGradients takes).
ModelSpec ModelOf(const Variant& v) {
  ModelSpec spec;
  spec.feature_dim = v.in_dim;
  spec.context = 0;
  spec.layers = {LayerSpec::Lstm(v.lstm)};
  spec.num_classes = 3;
  return spec;
}

std::string Describe(const Variant& v) {
  return absl::StrCat(DescribeModel(ModelOf(v)), ", ", v.sequences, " x ",
                      v.steps);
}

struct Values {
  std::vector<float> params, x;
};

// Parameters as training starts (forget bias 1) with noise on every value,
// and inputs uniform in ±input_scale.
Values RandomSetup(const Variant& v, uint64_t seed) {
  const ModelSpec spec = ModelOf(v);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  Values s;
  s.params = InitialParams(spec, seed);
  s.params.resize(LayerParamCount(spec, 0));
  for (float& p : s.params) p += 0.1f * u(rng);
  s.x.resize(int64_t{v.sequences} * v.steps * v.in_dim);
  for (float& x : s.x) x = v.input_scale * u(rng);
  return s;
}

std::vector<double> ToDouble(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

TEST(LstmLayerTest, ForwardMatchesAPlainLoop) {
  for (const Variant& v : Variants()) {
    const int rows = v.sequences * v.steps;
    LstmLayer lstm(v.in_dim, v.lstm, rows + 2);
    ASSERT_EQ(lstm.out_shape(), LayerOutputShape(ModelOf(v), 0));
    const Values s = RandomSetup(v, 5);
    const int64_t out_dim = lstm.out_shape().dim();
    std::vector<float> y(rows * out_dim, NAN);
    lstm.Forward(s.params.data(), s.x.data(), v.sequences, v.steps, y.data());
    int clipped = 0, cells = 0;
    const std::vector<double> want =
        ReferenceLstm(v.lstm, v.in_dim, ToDouble(s.params).data(),
                      ToDouble(s.x).data(), v.sequences, v.steps, &clipped,
                      &cells);
    for (int64_t j = 0; j < rows * out_dim; ++j) {
      ASSERT_NEAR(y[j], want[j], 2e-5) << Describe(v) << " value " << j;
    }
    if (v.lstm.cell_clip > 0) {
      // The clip is exercised, and does not freeze everything.
      EXPECT_GT(clipped, cells / 10) << Describe(v);
      EXPECT_LT(clipped, cells * 9 / 10) << Describe(v);
    }
  }
}

TEST(LstmLayerTest, LargeInputsSaturateAndNaNPropagates) {
  for (const Variant& v : {Variants()[0], Variants()[2]}) {  // clip: [2]
    const int rows = v.sequences * v.steps;
    LstmLayer lstm(v.in_dim, v.lstm, rows);
    Values s = RandomSetup(v, 3);
    const int64_t out_dim = lstm.out_shape().dim();
    std::vector<float> y(rows * out_dim);
    // Gate inputs far beyond exp's range: finite outputs, within ±1.
    for (float& x : s.x) x *= 1e4f;
    lstm.Forward(s.params.data(), s.x.data(), v.sequences, v.steps, y.data());
    for (float value : y) {
      ASSERT_TRUE(std::isfinite(value)) << Describe(v);
      ASSERT_LE(std::abs(value), 1.0f) << Describe(v);
    }
    // A NaN input reaches its sequence's outputs instead of vanishing.
    s.x[0] = NAN;  // step 0 of sequence 0
    lstm.Forward(s.params.data(), s.x.data(), v.sequences, v.steps, y.data());
    EXPECT_TRUE(std::isnan(y[0])) << Describe(v);
    EXPECT_TRUE(std::isnan(y[(rows - v.sequences) * out_dim]))  // last step
        << Describe(v);
    EXPECT_FALSE(std::isnan(y[out_dim])) << Describe(v);  // sequence 1
  }
}

TEST(LstmLayerTest, RowsBeyondTheBatchAreNotTouched) {
  // A batch smaller than max_rows, in a buffer with room after it.
  const Variant v = Variants()[3];
  const int rows = v.sequences * v.steps;
  LstmLayer lstm(v.in_dim, v.lstm, 4 * rows);
  const Values s = RandomSetup(v, 8);
  const int64_t out_dim = lstm.out_shape().dim();
  std::vector<float> y((rows + 1) * out_dim, 123.0f);
  lstm.Forward(s.params.data(), s.x.data(), v.sequences, v.steps, y.data());
  for (int64_t j = rows * out_dim; j < (rows + 1) * out_dim; ++j) {
    EXPECT_EQ(y[j], 123.0f);
  }
}

// Backward's gradients of S = Σ out · R against central differences of the
// double-precision loop, for every parameter and input; the step is small
// enough to stay clear of the clip's kinks.
TEST(LstmLayerTest, BackwardMatchesFiniteDifferencesOfThePlainLoop) {
  for (const Variant& v : Variants()) {
    const int rows = v.sequences * v.steps;
    LstmLayer lstm(v.in_dim, v.lstm, rows);
    const Values s = RandomSetup(v, 9);
    const int64_t out_size = rows * lstm.out_shape().dim();
    std::mt19937_64 rng(4);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> weights(out_size), y(out_size);
    for (float& w : weights) w = u(rng);
    lstm.Forward(s.params.data(), s.x.data(), v.sequences, v.steps, y.data());
    std::vector<float> dparams(s.params.size(), NAN), dx(s.x.size(), NAN);
    lstm.Backward(s.params.data(), s.x.data(), y.data(), weights.data(),
                  v.sequences, v.steps, dparams.data(), dx.data());

    std::vector<double> p = ToDouble(s.params), x = ToDouble(s.x);
    auto score = [&]() {
      int clipped = 0, cells = 0;
      const std::vector<double> o = ReferenceLstm(
          v.lstm, v.in_dim, p.data(), x.data(), v.sequences, v.steps,
          &clipped, &cells);
      double sum = 0;
      for (int64_t j = 0; j < out_size; ++j) sum += o[j] * weights[j];
      return sum;
    };
    auto numeric = [&](std::vector<double>& values, size_t j) {
      const double saved = values[j], h = 1e-6;
      values[j] = saved + h;
      const double plus = score();
      values[j] = saved - h;
      const double minus = score();
      values[j] = saved;
      return (plus - minus) / (2 * h);
    };
    for (size_t j = 0; j < p.size(); ++j) {
      const double want = numeric(p, j);
      ASSERT_NEAR(dparams[j], want, 1e-4 + 1e-4 * std::abs(want))
          << Describe(v) << " param " << j;
    }
    for (size_t j = 0; j < x.size(); ++j) {
      const double want = numeric(x, j);
      ASSERT_NEAR(dx[j], want, 1e-4 + 1e-4 * std::abs(want))
          << Describe(v) << " input " << j;
    }
  }
}

// The float check of gradient_check.h on every variant. Clipping has kinks
// where a cell value meets the clip: a small step keeps clear of them.
TEST(LstmLayerTest, BackwardMatchesFiniteDifferences) {
  for (const Variant& v : Variants()) {
    GradientCheckOptions options;
    options.input_scale = v.input_scale;
    if (v.lstm.cell_clip > 0) {
      options.step = 1e-4;
      options.atol = 5e-3;
    }
    GradientCheckReport r =
        CheckLayerGradients(ModelOf(v), 0, v.sequences, v.steps, options);
    EXPECT_GE(r.checked, 30);
    EXPECT_EQ(r.failures, 0) << Describe(v) << ": " << r.first_failure;
  }
}

TEST(LstmLayerTest, BackwardWithoutAnInputGradientGivesTheSameParameters) {
  const Variant v = Variants()[3];
  const int rows = v.sequences * v.steps;
  LstmLayer lstm(v.in_dim, v.lstm, rows);
  const Values s = RandomSetup(v, 2);
  const int64_t out_size = rows * lstm.out_shape().dim();
  std::vector<float> y(out_size), dout(out_size, 0.5f);
  lstm.Forward(s.params.data(), s.x.data(), v.sequences, v.steps, y.data());
  std::vector<float> with(s.params.size()), without(s.params.size());
  std::vector<float> dx(s.x.size());
  lstm.Backward(s.params.data(), s.x.data(), y.data(), dout.data(),
                v.sequences, v.steps, with.data(), dx.data());
  lstm.Backward(s.params.data(), s.x.data(), y.data(), dout.data(),
                v.sequences, v.steps, without.data(), nullptr);
  EXPECT_EQ(with, without);
}

}  // namespace
}  // namespace asgd
