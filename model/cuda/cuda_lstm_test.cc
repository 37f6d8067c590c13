// The CUDA backend's LSTM layers against the CPU backend's
// (model/layers/lstm.cc, checked there by finite differences): a stacked
// LSTM whose first layer has a projection and a cell clip that clips (about
// a quarter of its cell values on these inputs; backend_compare_test checks
// that it does), and a stacked BLSTM likewise (CompareLstm, CompareBlstm in
// backend_compare.h); fp32 and tf32 GEMMs; batches of 4 x 5, 1 x 1, 3 x 2
// and 2 x 7 sequences x steps (time-major) on one instance, a quarter of the
// rows unlabelled; and the --model=lstm (with projection and clip) and
// --model=blstm presets at their default sizes (fp32). Compared: the loss,
// the labelled and correct counts, every gradient tensor, every
// log-posterior and every prediction (tolerances in ToleranceFor). Every
// cell value is drawn at least 1e-3 (fp32) or 2e-2 (tf32) away from the clip
// (1e-4 for the presets), so that rounding cannot flip a clip. Skips without
// a CUDA device.
#include <string>
#include <tuple>

#include "gtest/gtest.h"
#include "model/cuda/backend_compare.h"
#include "model/cuda/cuda_test_util.h"
#include "model/model_presets.h"

namespace asgd {
namespace {

using MathMode = CudaOptions::MathMode;

// (bidirectional, GEMM math).
using Param = std::tuple<bool, MathMode>;

std::string ParamName(const Param& p) {
  return std::string(std::get<0>(p) ? "blstm" : "lstm") + "_" +
         std::string(CudaMathModeName(std::get<1>(p)));
}

class CudaLstmMatchesCpuTest : public ::testing::TestWithParam<Param> {};

TEST_P(CudaLstmMatchesCpuTest, ProjectionClippingSequences) {
  SKIP_WITHOUT_CUDA();
  const auto [bidirectional, math] = GetParam();
  CudaOptions options;
  options.math = math;
  ExpectCudaMatchesCpu(bidirectional ? CompareBlstm() : CompareLstm(), options,
                       {{4, 5}, {1, 1}, {3, 2}, {2, 7}},
                       math == MathMode::kFp32 ? 1e-3 : 2e-2, 51,
                       ParamName(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(DirectionsMath, CudaLstmMatchesCpuTest,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Values(MathMode::kFp32,
                                                              MathMode::kTf32)),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return ParamName(info.param);
                         });

TEST(CudaLstmTest, PresetsMatchCpu) {
  SKIP_WITHOUT_CUDA();
  for (const char* kind : {"lstm", "blstm"}) {
    SCOPED_TRACE(kind);
    ModelShapeOptions shape;
    shape.kind = kind;
    if (shape.kind == "lstm") {
      shape.lstm_projection = 128;
      shape.cell_clip = 1.0f;
    }
    auto spec = PresetModel(shape);
    ASSERT_TRUE(spec.ok()) << spec.status();
    CudaOptions options;
    options.math = MathMode::kFp32;
    ExpectCudaMatchesCpu(*spec, options, {{8, 20}, {1, 3}}, 1e-4, 61,
                         std::string("preset ") + kind);
  }
}

}  // namespace
}  // namespace asgd
