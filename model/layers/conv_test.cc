// The conv layer: forward against a plain double-precision loop (one and
// several input channels, time and frequency pooling with leftovers, every
// activation, several im2col blocks), backward by finite differences, and
// the same results whatever the block size.
#include "model/layers/conv.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/layers/gradient_check.h"
#include "model/layers/layer.h"

namespace asgd {
namespace {

double Act(Activation act, double z) {
  switch (act) {
    case Activation::kNone:
      return z;
    case Activation::kRelu:
      return std::max(z, 0.0);
    case Activation::kSigmoid:
      return 1 / (1 + std::exp(-z));
    case Activation::kTanh:
      return std::tanh(z);
  }
  return z;
}

// One row through conv + bias + activation + max-pooling, as model_spec.h
// defines it, in double.
std::vector<double> ReferenceConv(const FeatureShape& in, const ConvLayerSpec& c,
                                  const double* params, const double* x) {
  const int ct = in.time - c.kernel_time + 1;
  const int cf = in.freq - c.kernel_freq + 1;
  const int64_t nw = int64_t{c.filters} * in.channels * c.kernel_time * c.kernel_freq;
  auto w = [&](int k, int ch, int dt, int df) {
    return params[((int64_t{k} * in.channels + ch) * c.kernel_time + dt) *
                      c.kernel_freq +
                  df];
  };
  auto input = [&](int ch, int t, int f) {
    return x[(int64_t{ch} * in.time + t) * in.freq + f];
  };
  std::vector<double> act(int64_t{c.filters} * ct * cf);
  for (int k = 0; k < c.filters; ++k) {
    for (int t = 0; t < ct; ++t) {
      for (int f = 0; f < cf; ++f) {
        double z = params[nw + k];
        for (int ch = 0; ch < in.channels; ++ch) {
          for (int dt = 0; dt < c.kernel_time; ++dt) {
            for (int df = 0; df < c.kernel_freq; ++df) {
              z += w(k, ch, dt, df) * input(ch, t + dt, f + df);
            }
          }
        }
        act[(int64_t{k} * ct + t) * cf + f] = Act(c.activation, z);
      }
    }
  }
  const int pt = ct / c.pool_time, pf = cf / c.pool_freq;
  std::vector<double> out(int64_t{c.filters} * pt * pf);
  for (int k = 0; k < c.filters; ++k) {
    for (int t = 0; t < pt; ++t) {
      for (int f = 0; f < pf; ++f) {
        double best = -INFINITY;
        for (int i = 0; i < c.pool_time; ++i) {
          for (int j = 0; j < c.pool_freq; ++j) {
            best = std::max(best, act[(int64_t{k} * ct + t * c.pool_time + i) * cf +
                                      f * c.pool_freq + j]);
          }
        }
        out[(int64_t{k} * pt + t) * pf + f] = best;
      }
    }
  }
  return out;
}

std::vector<double> ToDouble(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

ConvLayerSpec Conv(int filters, int kt, int kf, int pt, int pf,
                   Activation act) {
  ConvLayerSpec c;
  c.filters = filters;
  c.kernel_time = kt;
  c.kernel_freq = kf;
  c.pool_time = pt;
  c.pool_freq = pf;
  c.activation = act;
  return c;
}

ModelSpec Model(int feature_dim, int context, std::vector<ConvLayerSpec> convs) {
  ModelSpec spec;
  spec.feature_dim = feature_dim;
  spec.context = context;
  for (const ConvLayerSpec& c : convs) spec.layers.push_back(LayerSpec::Conv(c));
  spec.layers.push_back(LayerSpec::Dense(6, Activation::kTanh));
  spec.num_classes = 4;
  return spec;
}

// The shapes the tests run: every conv layer of each of these models.
std::vector<ModelSpec> Models(Activation act) {
  return {
      // 7x13 input; 3x4 kernels, frequency pooling with one bin left over;
      // then a 4-channel layer with time pooling.
      Model(13, 3, {Conv(4, 3, 4, 1, 3, act), Conv(5, 2, 2, 2, 1, act)}),
      // Odd sizes, 2x2 pooling leaving a bin over in frequency.
      Model(7, 2, {Conv(3, 2, 3, 2, 2, act), Conv(2, 1, 2, 1, 1, act)}),
      // A kernel as large as its input, no pooling.
      Model(5, 1, {Conv(3, 3, 5, 1, 1, act)}),
  };
}

std::string Describe(const ModelSpec& spec, int layer) {
  return DescribeModel(spec) + ", layer " + std::to_string(layer);
}

// Random parameters (biases included) uniform in ±0.5, inputs and output
// gradients in ±1, for `rows` rows of conv layer `layer`.
struct RandomBatch {
  std::vector<float> params, x, dout;
};

RandomBatch MakeRandomBatch(const ModelSpec& spec, int layer, int rows,
                            uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  RandomBatch b;
  b.params.resize(LayerParamCount(spec, layer));
  for (float& p : b.params) p = 0.5f * u(rng);
  b.x.resize(int64_t{rows} * LayerInputShape(spec, layer).dim());
  for (float& v : b.x) v = u(rng);
  b.dout.resize(int64_t{rows} * LayerOutputShape(spec, layer).dim());
  for (float& v : b.dout) v = u(rng);
  return b;
}

// Checks every output of `rows` random rows against ReferenceConv.
void ExpectForwardMatches(const ModelSpec& spec, int layer, int rows,
                          int block_rows, uint64_t seed) {
  const FeatureShape in = LayerInputShape(spec, layer);
  const ConvLayerSpec& c = spec.layers[layer].conv;
  ConvLayer conv(in, c, rows, block_rows);
  ASSERT_EQ(conv.out_shape(), LayerOutputShape(spec, layer));
  const RandomBatch b = MakeRandomBatch(spec, layer, rows, seed);
  const std::vector<float>& params = b.params;
  const std::vector<float>& x = b.x;
  const int64_t out_dim = conv.out_shape().dim();
  std::vector<float> y(rows * out_dim, NAN);
  conv.Forward(params.data(), x.data(), rows, 1, y.data());
  for (int r = 0; r < rows; ++r) {
    const std::vector<double> want = ReferenceConv(
        in, c, ToDouble(params).data(), ToDouble(x).data() + r * in.dim());
    for (int64_t j = 0; j < out_dim; ++j) {
      ASSERT_NEAR(y[r * out_dim + j], want[j], 2e-5)
          << Describe(spec, layer) << " row " << r << " output " << j;
    }
  }
}

TEST(ConvLayerTest, ForwardMatchesAPlainLoop) {
  for (Activation act : {Activation::kNone, Activation::kRelu,
                         Activation::kSigmoid, Activation::kTanh}) {
    for (const ModelSpec& spec : Models(act)) {
      for (int layer = 0; layer < static_cast<int>(spec.layers.size()) - 1;
           ++layer) {
        ExpectForwardMatches(spec, layer, 5, 0, 11);
      }
    }
  }
}

TEST(ConvLayerTest, ForwardMatchesAPlainLoopOverSeveralBlocks) {
  // Block sizes that divide the rows and that leave a short last block.
  const ModelSpec spec = Models(Activation::kTanh)[0];
  for (int block : {1, 2, 3}) {
    ExpectForwardMatches(spec, 1, 7, block, 5);
  }
  // Sizes of a real first layer: the automatic block is smaller than the
  // batch.
  const ModelSpec big = Model(40, 5, {Conv(64, 3, 8, 1, 3, Activation::kRelu)});
  ConvLayer probe(LayerInputShape(big, 0), big.layers[0].conv, 128);
  ASSERT_LT(probe.block_rows(), 128);
  ExpectForwardMatches(big, 0, probe.block_rows() + 3, 0, 6);
}

// Backward's gradients of S = Σ out · R against central differences of the
// double-precision reference with a step small enough to stay clear of the
// kinks of max-pooling and relu: every parameter and every input.
void ExpectBackwardMatchesReference(const ModelSpec& spec, int layer, int rows,
                                    uint64_t seed) {
  const FeatureShape in = LayerInputShape(spec, layer);
  const ConvLayerSpec& c = spec.layers[layer].conv;
  ConvLayer conv(in, c, rows);
  const RandomBatch b = MakeRandomBatch(spec, layer, rows, seed);
  const std::vector<float>& params = b.params;
  const std::vector<float>& x = b.x;
  const std::vector<float>& weights = b.dout;
  const int64_t out_dim = conv.out_shape().dim();
  std::vector<float> y(rows * out_dim);
  conv.Forward(params.data(), x.data(), rows, 1, y.data());
  std::vector<float> dparams(params.size(), NAN), dx(x.size(), NAN);
  conv.Backward(params.data(), x.data(), y.data(), weights.data(), rows, 1,
                dparams.data(), dx.data());

  std::vector<double> p = ToDouble(params), xd = ToDouble(x);
  auto score = [&]() {
    double sum = 0;
    for (int r = 0; r < rows; ++r) {
      const std::vector<double> o =
          ReferenceConv(in, c, p.data(), xd.data() + r * in.dim());
      for (int64_t j = 0; j < out_dim; ++j) sum += o[j] * weights[r * out_dim + j];
    }
    return sum;
  };
  auto numeric = [&](std::vector<double>& v, size_t j) {
    const double saved = v[j], h = 1e-6;
    v[j] = saved + h;
    const double plus = score();
    v[j] = saved - h;
    const double minus = score();
    v[j] = saved;
    return (plus - minus) / (2 * h);
  };
  for (size_t j = 0; j < p.size(); ++j) {
    const double want = numeric(p, j);
    ASSERT_NEAR(dparams[j], want, 1e-4 + 1e-4 * std::abs(want))
        << Describe(spec, layer) << " param " << j;
  }
  for (size_t j = 0; j < xd.size(); ++j) {
    const double want = numeric(xd, j);
    ASSERT_NEAR(dx[j], want, 1e-4 + 1e-4 * std::abs(want))
        << Describe(spec, layer) << " input " << j;
  }
}

TEST(ConvLayerTest, BackwardMatchesFiniteDifferencesOfThePlainLoop) {
  for (Activation act : {Activation::kNone, Activation::kRelu,
                         Activation::kSigmoid, Activation::kTanh}) {
    for (const ModelSpec& spec : Models(act)) {
      for (int layer = 0; layer < static_cast<int>(spec.layers.size()) - 1;
           ++layer) {
        ExpectBackwardMatchesReference(spec, layer, 3, 21);
      }
    }
  }
}

// The float check (gradient_check.h) of every layer. Max-pooling has kinks
// where two values of a window are equal, and a parameter moves every window
// of its filter: the default step of 1e-2 crosses one now and then, 1e-4
// does not on these shapes (with a looser atol for the float noise that a
// small step brings).
GradientCheckOptions SmallStep() {
  GradientCheckOptions options;
  options.step = 1e-4;
  options.atol = 5e-3;
  return options;
}

TEST(ConvLayerTest, BackwardMatchesFiniteDifferences) {
  for (Activation act : {Activation::kSigmoid, Activation::kTanh}) {
    for (const ModelSpec& spec : Models(act)) {
      for (int layer = 0; layer < static_cast<int>(spec.layers.size()) - 1;
           ++layer) {
        GradientCheckReport r =
            CheckLayerGradients(spec, layer, 3, 1, SmallStep());
        EXPECT_GE(r.checked, 50);
        EXPECT_EQ(r.failures, 0)
            << Describe(spec, layer) << ": " << r.first_failure;
      }
    }
  }
}

// relu is not differentiable at 0 either: allow the odd element within the
// step of its kink.
TEST(ConvLayerTest, ReluBackwardMatchesFiniteDifferencesAwayFromTheKinks) {
  for (const ModelSpec& spec : Models(Activation::kRelu)) {
    for (int layer = 0; layer < static_cast<int>(spec.layers.size()) - 1;
         ++layer) {
      GradientCheckReport r = CheckLayerGradients(spec, layer, 4, 1, SmallStep());
      EXPECT_GE(r.checked, 50);
      EXPECT_LE(r.failures, r.checked / 50)
          << Describe(spec, layer) << ": " << r.first_failure;
    }
  }
}

TEST(ConvLayerTest, BlockSizeDoesNotChangeTheGradients) {
  const ModelSpec spec = Models(Activation::kSigmoid)[0];
  const int layer = 1, rows = 7;
  const FeatureShape in = LayerInputShape(spec, layer);
  const ConvLayerSpec& c = spec.layers[layer].conv;
  const RandomBatch b = MakeRandomBatch(spec, layer, rows, 3);
  const std::vector<float>& params = b.params;
  const std::vector<float>& x = b.x;
  const std::vector<float>& dout = b.dout;
  const int64_t out_size = dout.size();

  auto gradients = [&](int block_rows, std::vector<float>* dparams,
                       std::vector<float>* din) {
    ConvLayer conv(in, c, rows, block_rows);
    std::vector<float> y(out_size);
    conv.Forward(params.data(), x.data(), rows, 1, y.data());
    dparams->assign(params.size(), NAN);
    din->assign(x.size(), NAN);
    conv.Backward(params.data(), x.data(), y.data(), dout.data(), rows, 1,
                  dparams->data(), din->data());
  };
  std::vector<float> dp_whole, dx_whole, dp_blocks, dx_blocks;
  gradients(rows, &dp_whole, &dx_whole);
  gradients(3, &dp_blocks, &dx_blocks);
  for (size_t j = 0; j < dp_whole.size(); ++j) {
    ASSERT_NEAR(dp_whole[j], dp_blocks[j], 1e-5) << "param " << j;
  }
  for (size_t j = 0; j < dx_whole.size(); ++j) {
    ASSERT_NEAR(dx_whole[j], dx_blocks[j], 1e-5) << "input " << j;
  }
}

}  // namespace
}  // namespace asgd
