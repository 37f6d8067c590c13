// ToMultiFrame: the hidden layers are kept and every head starts as the
// output layer, so each head's log-posteriors are the one-frame model's;
// bad requests are refused.
#include "shrink/multi_frame.h"

#include <vector>

#include "gtest/gtest.h"
#include "model/cpu_backend.h"

namespace asgd {
namespace {

SavedModel Dnn() {
  SavedModel m;
  m.spec.feature_dim = 3;
  m.spec.context = 1;
  m.spec.layers = {LayerSpec::Dense(7, Activation::kRelu)};
  m.spec.num_classes = 4;
  m.params = InitialParams(m.spec, 3);
  // Biases too, so that a head copying the wrong part shows.
  for (size_t i = 0; i < m.params.size(); ++i) m.params[i] += 0.01f * (i % 7);
  return m;
}

TEST(MultiFrameTest, EveryHeadStartsAsTheOutputLayer) {
  const SavedModel one = Dnn();
  auto multi = ToMultiFrame(one, 3);
  ASSERT_TRUE(multi.ok()) << multi.status();
  EXPECT_EQ(multi->spec.output_frames, 3);
  ASSERT_EQ(static_cast<int64_t>(multi->params.size()),
            ModelParamCount(multi->spec));
  const int rows = 5, c = one.spec.num_classes;
  std::vector<float> inputs(rows * one.spec.input_dim());
  for (size_t i = 0; i < inputs.size(); ++i) inputs[i] = 0.1f * (i % 11) - 0.4f;
  auto b1 = CreateCpuBackend(one.spec, rows);
  auto b3 = CreateCpuBackend(multi->spec, rows);
  ASSERT_TRUE(b1.ok() && b3.ok());
  std::vector<float> lp1(rows * c), lp3(rows * 3 * c);
  ASSERT_TRUE((*b1)->LogPosteriors(one.params, Batch{rows, 1, inputs, {}},
                                   absl::MakeSpan(lp1)).ok());
  ASSERT_TRUE((*b3)->LogPosteriors(multi->params, Batch{rows, 1, inputs, {}},
                                   absl::MakeSpan(lp3)).ok());
  for (int i = 0; i < rows; ++i) {
    for (int h = 0; h < 3; ++h) {
      for (int k = 0; k < c; ++k) {
        ASSERT_FLOAT_EQ(lp3[(i * 3 + h) * c + k], lp1[i * c + k])
            << "row " << i << " head " << h;
      }
    }
  }
}

TEST(MultiFrameTest, BadRequestsAreRefused) {
  const SavedModel one = Dnn();
  for (int k : {0, 1, -2, kMaxOutputFrames + 1}) {
    EXPECT_EQ(ToMultiFrame(one, k).status().code(),
              absl::StatusCode::kInvalidArgument)
        << k;
  }
  auto two = ToMultiFrame(one, 2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(ToMultiFrame(*two, 2).status().code(),
            absl::StatusCode::kInvalidArgument);  // already multi-frame
  SavedModel short_params = one;
  short_params.params.pop_back();
  EXPECT_EQ(ToMultiFrame(short_params, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  SavedModel lstm;
  lstm.spec.feature_dim = 3;
  lstm.spec.context = 0;
  LstmLayerSpec cells;
  cells.cells = 4;
  lstm.spec.layers = {LayerSpec::Lstm(cells)};
  lstm.params = InitialParams(lstm.spec, 1);
  EXPECT_EQ(ToMultiFrame(lstm, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
