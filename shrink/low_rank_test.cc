#include "shrink/low_rank.h"

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "model/cpu_backend.h"
#include "model/model_spec.h"

namespace asgd {
namespace {

// 3 stacked frames of 12 features, dense 24 and 20, 10 classes.
ModelSpec SmallDnn() {
  ModelSpec spec;
  spec.feature_dim = 12;
  spec.context = 1;
  spec.layers = {LayerSpec::Dense(24, Activation::kRelu),
                 LayerSpec::Dense(20, Activation::kTanh)};
  spec.num_classes = 10;
  return spec;
}

std::vector<float> RandomInputs(int rows, int dim, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows) * dim);
  for (float& v : x) v = n(rng);
  return x;
}

// The models' log-posteriors on the same random rows.
void ExpectSameOutputs(const ModelSpec& a, const std::vector<float>& pa,
                       const ModelSpec& b, const std::vector<float>& pb,
                       float tolerance) {
  const int rows = 64;
  const std::vector<float> x = RandomInputs(rows, a.input_dim(), 7);
  std::vector<float> out_a(rows * a.num_classes), out_b(out_a.size());
  for (auto [spec, params, out] :
       {std::make_tuple(&a, &pa, &out_a), std::make_tuple(&b, &pb, &out_b)}) {
    auto backend = CreateCpuBackend(*spec, rows);
    ASSERT_TRUE(backend.ok()) << backend.status();
    Batch batch;
    batch.sequences = rows;
    batch.inputs = x;
    ASSERT_TRUE((*backend)
                    ->LogPosteriors(*params, batch, absl::MakeSpan(*out))
                    .ok());
  }
  for (size_t i = 0; i < out_a.size(); ++i) {
    ASSERT_NEAR(out_a[i], out_b[i], tolerance) << i;
  }
}

TEST(LowRankTest, FullRankComputesTheSameFunction) {
  const ModelSpec spec = SmallDnn();
  const std::vector<float> params = InitialParams(spec, 3);
  // Every factorable layer: layer 0 (24 x 36), 1 (20 x 24), output (10 x 20).
  absl::StatusOr<LowRankResult> r =
      FactorLowRank(spec, params, {{0, 24, 0}, {1, 20, 0}, {2, 10, 0}});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->model.spec.layers.size(), 5u);
  EXPECT_EQ(r->model.spec.layers[0].dense.activation, Activation::kNone);
  EXPECT_EQ(r->model.spec.layers[0].dense.units, 24);
  EXPECT_EQ(r->model.spec.layers[1].dense.activation, Activation::kRelu);
  EXPECT_EQ(r->model.spec.layers[4].dense.units, 10);  // before the output
  ASSERT_EQ(r->layers.size(), 3u);
  for (const FactoredLayer& f : r->layers) {
    EXPECT_NEAR(f.kept_energy, 1.0, 1e-12);
    EXPECT_NEAR(f.relative_error, 0.0, 1e-6);
  }
  ExpectSameOutputs(spec, params, r->model.spec, r->model.params, 2e-5f);
}

// |W - A B|_F computed from the factored model's tensors, against the
// Eckart–Young value the result reports.
TEST(LowRankTest, TruncationErrorIsTheDroppedSingularValues) {
  const ModelSpec spec = SmallDnn();
  const std::vector<float> params = InitialParams(spec, 5);
  absl::StatusOr<LowRankResult> r = FactorLowRank(spec, params, {{1, 6, 0}});
  ASSERT_TRUE(r.ok()) << r.status();
  const ModelSpec& out = r->model.spec;
  ASSERT_EQ(out.layers.size(), 3u);
  const int64_t units = 20, inputs = 24, rank = 6;
  const float* w = params.data() + LayerParamOffset(spec, 1);
  const float* b = r->model.params.data() + LayerParamOffset(out, 1);
  const float* a = r->model.params.data() + LayerParamOffset(out, 2);
  double err = 0, norm = 0;
  for (int64_t i = 0; i < units; ++i) {
    for (int64_t j = 0; j < inputs; ++j) {
      double ab = 0;
      for (int64_t p = 0; p < rank; ++p) {
        ab += double{a[i * rank + p]} * b[p * inputs + j];
      }
      err += (w[i * inputs + j] - ab) * (w[i * inputs + j] - ab);
      norm += double{w[i * inputs + j]} * w[i * inputs + j];
    }
  }
  ASSERT_EQ(r->layers.size(), 1u);
  const FactoredLayer& f = r->layers[0];
  EXPECT_GT(f.relative_error, 0.1);  // a real truncation
  EXPECT_NEAR(std::sqrt(err / norm), f.relative_error, 1e-5);
  EXPECT_EQ(f.params_before, 20 * 24 + 20);
  EXPECT_EQ(f.params_after, 6 * 25 + 20 * 7);
  EXPECT_EQ(ModelParamCount(out),
            ModelParamCount(spec) - f.params_before + f.params_after);
  // The bottleneck's bias is zero; the layer keeps its bias and activation.
  for (int64_t p = 0; p < rank; ++p) EXPECT_EQ(b[rank * inputs + p], 0.0f);
  EXPECT_EQ(out.layers[2].dense.activation, Activation::kTanh);
  // Untouched layers are copied bit for bit.
  for (int64_t i = 0; i < LayerParamCount(spec, 0); ++i) {
    ASSERT_EQ(r->model.params[i], params[i]);
  }
}

TEST(LowRankTest, EnergyChoosesTheSmallestRankThatKeepsIt) {
  const std::vector<double> s = {3, 2, 1};  // energies 9, 4, 1 of 14
  EXPECT_EQ(RankForEnergy(s, 9.0 / 14), 1);
  EXPECT_EQ(RankForEnergy(s, 0.65), 2);
  EXPECT_EQ(RankForEnergy(s, 13.0 / 14), 2);
  EXPECT_EQ(RankForEnergy(s, 1.0), 3);
  EXPECT_EQ(RankForEnergy(s, 1e-9), 1);

  const ModelSpec spec = SmallDnn();
  absl::StatusOr<LowRankResult> r =
      FactorLowRank(spec, InitialParams(spec, 1), {{0, 0, 0.5}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GE(r->layers[0].kept_energy, 0.5);
  EXPECT_LT(r->layers[0].rank, 24);
}

TEST(LowRankTest, ADenseLayerAfterConvolutionsIsFactored) {
  ModelSpec spec;
  spec.feature_dim = 16;
  spec.context = 2;
  ConvLayerSpec conv;
  conv.filters = 3;
  spec.layers = {LayerSpec::Conv(conv), LayerSpec::Dense(12, Activation::kRelu)};
  spec.num_classes = 5;
  ASSERT_TRUE(ValidateModelSpec(spec).ok());
  const std::vector<float> params = InitialParams(spec, 2);
  const int inputs = LayerInputShape(spec, 1).dim();
  absl::StatusOr<LowRankResult> r =
      FactorLowRank(spec, params, {{1, std::min(12, inputs), 0}});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectSameOutputs(spec, params, r->model.spec, r->model.params, 2e-5f);
  EXPECT_EQ(FactorLowRank(spec, params, {{0, 2, 0}}).status().code(),
            absl::StatusCode::kInvalidArgument);  // the conv layer
}

TEST(LowRankTest, RefusesWhatCannotBeFactored) {
  const ModelSpec spec = SmallDnn();
  const std::vector<float> params = InitialParams(spec, 1);
  const std::vector<std::vector<LayerRank>> bad = {
      {},                         // nothing asked
      {{3, 2, 0}},                // no such layer
      {{-1, 2, 0}},
      {{0, 25, 0}},               // rank above min(24, 36)
      {{2, 11, 0}},               // output layer: min(10, 20)
      {{0, -1, 0}},
      {{0, 0, 0}},                // neither rank nor energy
      {{0, 0, 1.5}},
      {{1, 2, 0}, {1, 3, 0}},     // twice
  };
  for (const std::vector<LayerRank>& layers : bad) {
    EXPECT_EQ(FactorLowRank(spec, params, layers).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  std::vector<float> short_params(params.begin(), params.end() - 1);
  EXPECT_EQ(FactorLowRank(spec, short_params, {{0, 2, 0}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LowRankTest, ParsesFactorLists) {
  const ModelSpec spec = SmallDnn();
  absl::StatusOr<std::vector<LayerRank>> l =
      ParseLayerRanks("1:8,output", spec, 0, 0.9);
  ASSERT_TRUE(l.ok()) << l.status();
  ASSERT_EQ(l->size(), 2u);
  EXPECT_EQ((*l)[0].layer, 1);
  EXPECT_EQ((*l)[0].rank, 8);
  EXPECT_EQ((*l)[1].layer, 2);
  EXPECT_EQ((*l)[1].rank, 0);
  EXPECT_EQ((*l)[1].energy, 0.9);
  l = ParseLayerRanks("all", spec, 4, 0);
  ASSERT_TRUE(l.ok()) << l.status();
  ASSERT_EQ(l->size(), 3u);
  EXPECT_EQ((*l)[2].rank, 4);
  // All at rank 10: the output layer (10 x 20) is left as it is.
  l = ParseLayerRanks("all", spec, 10, 0);
  ASSERT_TRUE(l.ok()) << l.status();
  ASSERT_EQ(l->size(), 2u);
  EXPECT_EQ((*l)[1].layer, 1);
  for (const char* bad : {"", "x", "1:", "1:0", "1:2:3", "all:3", "output:-2"}) {
    EXPECT_EQ(ParseLayerRanks(bad, spec, 4, 0).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

}  // namespace
}  // namespace asgd
