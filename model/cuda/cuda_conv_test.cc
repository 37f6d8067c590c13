// The CUDA backend's conv layers against the CPU backend's
// (model/layers/conv.cc, checked there by finite differences): a CNN of two
// conv layers with pooling in time and in frequency, positions left over at
// the high end in both, odd sizes, then a dense layer (CompareCnn in
// backend_compare.h), with relu and tanh, fp32 and tf32 GEMMs, the im2col
// blocks of the layer's own choosing and of 3 rows (several blocks per
// batch), batches of 64, 1 and 7 rows on one instance with a quarter of the
// rows unlabelled; the weight gradient summed from short slices and from
// one GEMM per block; the --model=cnn preset at its default size (fp32);
// and the layer profile (cuda_profile.h) of such a CNN.
// Compared: the loss, the labelled and correct counts, every gradient tensor,
// every log-posterior and every prediction (tolerances in ToleranceFor).
// Every ReLU input and every pooling window's top two values are drawn at
// least 1e-3 (fp32) or 5e-3 (tf32) apart (1e-4 for the preset), so that
// rounding cannot flip a decision. Skips without a CUDA device.
#include <string>
#include <tuple>

#include "gtest/gtest.h"
#include "model/cuda/backend_compare.h"
#include "model/cuda/cuda_profile.h"
#include "model/cuda/cuda_test_util.h"
#include "model/model_presets.h"

namespace asgd {
namespace {

using MathMode = CudaOptions::MathMode;

// (activation, GEMM math, conv_block_rows).
using Param = std::tuple<Activation, MathMode, int>;

std::string ParamName(const Param& p) {
  return std::string(ActivationName(std::get<0>(p))) + "_" +
         std::string(CudaMathModeName(std::get<1>(p))) + "_block" +
         std::to_string(std::get<2>(p));
}

class CudaConvMatchesCpuTest : public ::testing::TestWithParam<Param> {};

TEST_P(CudaConvMatchesCpuTest, TwoConvLayersWithPooling) {
  SKIP_WITHOUT_CUDA();
  const auto [act, math, block_rows] = GetParam();
  CudaOptions options;
  options.math = math;
  options.conv_block_rows = block_rows;
  ExpectCudaMatchesCpu(CompareCnn(act), options, {{64, 1}, {1, 1}, {7, 1}},
                       math == MathMode::kFp32 ? 1e-3 : 5e-3, 31,
                       "cnn " + ParamName(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(
    ActivationsMathBlocks, CudaConvMatchesCpuTest,
    ::testing::Combine(::testing::Values(Activation::kRelu, Activation::kTanh),
                       ::testing::Values(MathMode::kFp32, MathMode::kTf32),
                       ::testing::Values(0, 3)),
    [](const ::testing::TestParamInfo<Param>& info) {
      return ParamName(info.param);
    });

// The weight gradients summed from slices of 37 patch rows (a rest in most
// blocks) by a strided-batched GEMM, and from one GEMM per block.
TEST(CudaConvTest, WeightGradientSlicesMatchCpu) {
  SKIP_WITHOUT_CUDA();
  for (int slice : {37, 1 << 30}) {
    CudaOptions options;
    options.math = MathMode::kFp32;
    options.conv_block_rows = 3;
    options.conv_dw_slice_rows = slice;
    ExpectCudaMatchesCpu(CompareCnn(Activation::kRelu), options,
                         {{64, 1}, {7, 1}}, 1e-3, 31,
                         "cnn dW slices of " + std::to_string(slice));
  }
}

// The layer profile names every layer's passes and the conv steps.
TEST(CudaConvTest, ProfileTimesEveryLayersSteps) {
  SKIP_WITHOUT_CUDA();
  CudaOptions options;
  options.conv_dw_slice_rows = 37;
  auto table =
      ProfileCudaLayers(CompareCnn(Activation::kRelu), 64, 1, options, 3);
  ASSERT_TRUE(table.ok()) << table.status();
  for (const char* want :
       {"| 0 conv | forward | **total** |", "| 0 conv | backward | **total** |",
        "| 1 conv | backward | Col2ImOp ", "| 0 conv | forward | Im2ColOp ",
        "| 0 conv | backward | SumPartsOp ", "| 2 dense | forward | gemm ",
        "| output | backward | gemm "}) {
    EXPECT_NE(table->find(want), std::string::npos) << want << "\n" << *table;
  }
  // The first layer computes no input gradient.
  EXPECT_EQ(table->find("| 0 conv | backward | Col2ImOp"), std::string::npos);
}

// Counts are checked before any device is looked for.
TEST(CudaConvTest, ProfileRefusesBadCounts) {
  for (auto [sequences, steps, iters] :
       {std::tuple{0, 1, 1}, std::tuple{1, 0, 1}, std::tuple{1, 1, 0}}) {
    EXPECT_EQ(ProfileCudaLayers(CompareCnn(Activation::kRelu), sequences, steps,
                                CudaOptions(), iters)
                  .status()
                  .code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST(CudaConvTest, PresetCnnMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  ModelShapeOptions shape;
  shape.kind = "cnn";
  auto spec = PresetModel(shape);
  ASSERT_TRUE(spec.ok()) << spec.status();
  CudaOptions options;
  options.math = MathMode::kFp32;
  ExpectCudaMatchesCpu(*spec, options, {{32, 1}, {3, 1}}, 1e-4, 41,
                       "preset cnn");
}

}  // namespace
}  // namespace asgd
