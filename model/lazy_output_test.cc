// Lazy output evaluation: the active pdfs' logits equal the full output
// layer's at the same entries (and a direct double-precision sum), differ
// from the CPU backend's log-posteriors by one constant per frame (the
// log-softmax normaliser), and malformed active lists are refused.
#include "model/lazy_output.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "model/cpu_backend.h"

namespace asgd {
namespace {

// A DNN with one linear hidden layer (so its output h is easy to compute
// here) before the output layer.
ModelSpec SmallSpec() {
  ModelSpec spec;
  spec.feature_dim = 6;
  spec.context = 1;  // 18 inputs
  spec.layers = {LayerSpec::Dense(29, Activation::kNone)};
  spec.num_classes = 23;
  return spec;
}

std::vector<float> Random(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

TEST(LazyOutputTest, ActiveLogitsEqualTheFullLayerAndADirectSum) {
  std::mt19937 rng(7);
  const ModelSpec spec = SmallSpec();
  const std::vector<float> params = Random(ModelParamCount(spec), rng);
  auto layer = OutputLayerOf(spec, params);
  ASSERT_TRUE(layer.ok()) << layer.status();
  ASSERT_EQ(layer->in, 29);
  ASSERT_EQ(layer->classes, 23);
  // The view is the last two tensors: weight, then bias, ending the model.
  EXPECT_EQ(layer->bias + 23, params.data() + params.size());
  EXPECT_EQ(layer->weight + 23 * 29, layer->bias);

  const int64_t frames = 9;
  const std::vector<float> h = Random(frames * 29, rng);
  ActiveOutputs active;
  for (int64_t f = 0; f < frames; ++f) {
    std::vector<int32_t> pdfs;
    if (f != 3) {  // frame 3 asks for nothing
      for (int p = 0; p < 23; ++p) {
        if ((p * 7 + f) % 3 == 0) pdfs.push_back(p);
      }
      pdfs.push_back(pdfs.front());  // a repeat
    }
    active.AddFrame(pdfs);
  }
  ASSERT_TRUE(CheckActiveOutputs(active, frames, 23).ok());
  std::vector<float> lazy(active.pdfs.size()), full(frames * 23),
      one(23);
  LazyLogits(*layer, h.data(), active, lazy.data());
  FullLogits(*layer, h.data(), frames, full.data());
  int64_t checked = 0;
  for (int64_t f = 0; f < frames; ++f) {
    FullLogits(*layer, h.data() + f * 29, 1, one.data());  // the GEMV path
    for (int64_t k = active.begin[f]; k < active.begin[f + 1]; ++k) {
      const int p = active.pdfs[k];
      double direct = layer->bias[p];
      for (int i = 0; i < 29; ++i) {
        direct += double{layer->weight[p * 29 + i]} * h[f * 29 + i];
      }
      EXPECT_NEAR(lazy[k], direct, 1e-5) << "frame " << f << " pdf " << p;
      EXPECT_NEAR(full[f * 23 + p], direct, 1e-5);
      EXPECT_NEAR(one[p], direct, 1e-5);
      ++checked;
    }
  }
  EXPECT_EQ(checked, static_cast<int64_t>(active.pdfs.size()));
}

TEST(LazyOutputTest, ScoresAreTheLogPosteriorsPlusAConstantPerFrame) {
  std::mt19937 rng(11);
  const ModelSpec spec = SmallSpec();
  const std::vector<float> params = Random(ModelParamCount(spec), rng);
  const int rows = 5;
  const std::vector<float> x = Random(int64_t{rows} * spec.input_dim(), rng);
  auto backend = CreateCpuBackend(spec, rows);
  ASSERT_TRUE(backend.ok()) << backend.status();
  Batch batch;
  batch.sequences = rows;
  batch.inputs = x;
  std::vector<float> logp(rows * 23);
  ASSERT_TRUE((*backend)->LogPosteriors(params, batch, absl::MakeSpan(logp)).ok());
  // h = the hidden layer's output (linear), computed here.
  const float* w1 = params.data();
  const float* b1 = w1 + 29 * spec.input_dim();
  std::vector<float> h(rows * 29);
  for (int r = 0; r < rows; ++r) {
    for (int u = 0; u < 29; ++u) {
      double s = b1[u];
      for (int i = 0; i < spec.input_dim(); ++i) {
        s += double{w1[u * spec.input_dim() + i]} * x[r * spec.input_dim() + i];
      }
      h[r * 29 + u] = static_cast<float>(s);
    }
  }
  ActiveOutputs active;
  for (int r = 0; r < rows; ++r) active.AddFrame({0, 5, 22, 11});
  auto layer = OutputLayerOf(spec, params);
  ASSERT_TRUE(layer.ok());
  std::vector<float> lazy(active.pdfs.size());
  LazyLogits(*layer, h.data(), active, lazy.data());
  for (int r = 0; r < rows; ++r) {
    const int64_t k0 = active.begin[r];
    const double offset = lazy[k0] - logp[r * 23 + active.pdfs[k0]];
    EXPECT_GT(offset, 0.0);  // log sum exp over 23 pdfs > any one logit
    for (int64_t k = k0; k < active.begin[r + 1]; ++k) {
      EXPECT_NEAR(lazy[k] - logp[r * 23 + active.pdfs[k]], offset, 1e-4)
          << "row " << r << " pdf " << active.pdfs[k];
    }
  }
}

TEST(LazyOutputTest, MalformedActiveListsAndModelsAreRefused) {
  auto refused = [](const ActiveOutputs& a, int64_t frames) {
    return CheckActiveOutputs(a, frames, 10).code() ==
           absl::StatusCode::kInvalidArgument;
  };
  ActiveOutputs good;
  good.AddFrame({0, 9});
  good.AddFrame({});
  EXPECT_TRUE(CheckActiveOutputs(good, 2, 10).ok());
  EXPECT_TRUE(refused(good, 3));  // another number of frames
  ActiveOutputs high = good;
  high.pdfs[1] = 10;
  EXPECT_TRUE(refused(high, 2));
  ActiveOutputs negative = good;
  negative.pdfs[0] = -1;
  EXPECT_TRUE(refused(negative, 2));
  ActiveOutputs decreasing = good;
  decreasing.begin = {0, 2, 1};
  decreasing.pdfs.push_back(3);
  EXPECT_TRUE(refused(decreasing, 2));
  ActiveOutputs short_offsets = good;
  short_offsets.begin.back() = 1;
  EXPECT_TRUE(refused(short_offsets, 2));

  const ModelSpec spec = SmallSpec();
  std::vector<float> params(ModelParamCount(spec) - 1);
  EXPECT_EQ(OutputLayerOf(spec, params).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
