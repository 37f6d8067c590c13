// The CUDA layers' steps (dense_impl.h, conv_impl.h, lstm_impl.h), run on the
// CPU through HostExec, against the CPU layers of model/layers/ (which
// layers/*_test.cc check by finite differences). This is every index, every
// GEMM argument (in the column-major form cuda::Gemm hands to cuBLAS), every
// element-wise op and every step order of the CUDA layers, checked on any
// machine: what a GPU adds is only the launch of each pass (cuda_exec.cuh),
// cuBLAS itself and the reduction kernels (cuda_kernels.cu), which the
// CPU-vs-CUDA tests cover where a device is present.
//
// Each case runs twice, with HostExec visiting the elements of every pass
// forward and backward: an op that read what another element of its pass
// writes (a race on a GPU) would see different values in the two orders.
// Scratch buffers are allocated at exactly the sizes the CUDA layers
// allocate (ConvScratchSizesFor, LstmScratchSizesFor), each on its own, so
// that an out-of-bounds index shows under a sanitizer; outputs start as NaN,
// so that an element a step forgets to write fails.
//
// Tolerance: max |impl - cpu| <= 1e-4 * max(1, max |cpu|) per buffer (both
// run OpenBLAS in fp32; they differ in where the bias is added and in exp).
#include <cblas.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/cuda/conv_impl.h"
#include "model/cuda/dense_impl.h"
#include "model/cuda/host_exec.h"
#include "model/cuda/lstm_impl.h"
#include "model/layers/conv.h"
#include "model/layers/dense.h"
#include "model/layers/lstm.h"

namespace asgd {
namespace cuda_ops {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
using Order = HostExec::Order;

std::vector<float> Random(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v) x = scale * normal(rng);
  return v;
}

void ExpectNear(const std::vector<float>& want, const std::vector<float>& got,
                const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  double max_want = 0, max_err = 0;
  size_t worst = 0;
  for (size_t j = 0; j < want.size(); ++j) {
    max_want = std::max(max_want, std::abs(double{want[j]}));
    const double err = std::abs(double{got[j]} - want[j]);
    if (std::isnan(err) || err > max_err) {
      max_err = err;
      worst = j;
      if (std::isnan(err)) break;
    }
  }
  EXPECT_LE(max_err, 1e-4 * std::max(1.0, max_want))
      << what << ": element " << worst << " of " << want.size() << ": cpu "
      << want[worst] << ", impl " << got[worst];
}

std::string OrderName(Order order) {
  return order == Order::kForward ? "forward order" : "backward order";
}

// ---------------------------------------------------------------------------
// The GEMM translation (the column-major call cuda::Gemm makes to cuBLAS).

TEST(LayerImplTest, ColumnMajorGemmIsTheRowMajorProduct) {
  const int m = 5, n = 7, k = 3, pad = 2;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (float beta : {0.0f, 1.0f}) {
        SCOPED_TRACE(testing::Message() << "trans_a " << ta << " trans_b " << tb
                                        << " beta " << beta);
        // Stored row-major: A is [m, k] or [k, m], B [k, n] or [n, k], each
        // with `pad` spare columns; C [m, n] with pad spare columns.
        const int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad;
        const int ldc = n + pad;
        const std::vector<float> a = Random(int64_t{ta ? k : m} * lda, 11);
        const std::vector<float> b = Random(int64_t{tb ? n : k} * ldb, 12);
        const std::vector<float> c0 = Random(int64_t{m} * ldc, 13);
        std::vector<float> want = c0;
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                    tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a.data(),
                    lda, b.data(), ldb, beta, want.data(), ldc);
        std::vector<float> got = c0;
        HostExec exec;
        ASSERT_TRUE(exec.Gemm(ta, tb, m, n, k, a.data(), lda, b.data(), ldb,
                              beta, got.data(), ldc)
                        .ok());
        ExpectNear(want, got, "C");
        // The spare columns of C are left alone.
        for (int i = 0; i < m; ++i) {
          for (int j = n; j < ldc; ++j) {
            EXPECT_EQ(got[int64_t{i} * ldc + j], c0[int64_t{i} * ldc + j]);
          }
        }
      }
    }
  }
}

TEST(LayerImplTest, StridedBatchIsEachMatrixsRowMajorProduct) {
  const int m = 4, n = 6, k = 3, batch = 3, pad = 1;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (float beta : {0.0f, 1.0f}) {
        SCOPED_TRACE(testing::Message() << "trans_a " << ta << " trans_b " << tb
                                        << " beta " << beta);
        const int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad;
        const int ldc = n + pad;
        // Each matrix's stride leaves a gap of 5 floats after it.
        const int64_t stride_a = int64_t{ta ? k : m} * lda + 5;
        const int64_t stride_b = int64_t{tb ? n : k} * ldb + 5;
        const int64_t stride_c = int64_t{m} * ldc + 5;
        const std::vector<float> a = Random(stride_a * batch, 21);
        const std::vector<float> b = Random(stride_b * batch, 22);
        const std::vector<float> c0 = Random(stride_c * batch, 23);
        std::vector<float> want = c0;
        for (int j = 0; j < batch; ++j) {
          cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                      tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
                      a.data() + j * stride_a, lda, b.data() + j * stride_b,
                      ldb, beta, want.data() + j * stride_c, ldc);
        }
        std::vector<float> got = c0;
        HostExec exec;
        ASSERT_TRUE(exec.GemmStridedBatched(ta, tb, m, n, k, a.data(), lda,
                                            stride_a, b.data(), ldb, stride_b,
                                            beta, got.data(), ldc, stride_c,
                                            batch)
                        .ok());
        ExpectNear(want, got, "C");
        // Padding and gaps are left alone.
        for (int j = 0; j < batch; ++j) {
          for (int64_t e = 0; e < stride_c; ++e) {
            const int64_t i = e / ldc, col = e % ldc;
            if (i < m && col < n) continue;
            EXPECT_EQ(got[j * stride_c + e], c0[j * stride_c + e]);
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Dense.

void CheckDense(int in_dim, int units, Activation act, int n, bool with_din) {
  const std::string name =
      "dense(" + std::to_string(in_dim) + "->" + std::to_string(units) + "," +
      std::string(ActivationName(act)) + ") rows " + std::to_string(n);
  SCOPED_TRACE(name);
  DenseLayer cpu(in_dim, units, act, n);
  const int64_t num_params = int64_t{units} * (in_dim + 1);
  const std::vector<float> params = Random(num_params, 1, 0.3f);
  const std::vector<float> in = Random(int64_t{n} * in_dim, 2);
  const std::vector<float> dout = Random(int64_t{n} * units, 3);
  std::vector<float> out(int64_t{n} * units), dparams(num_params),
      din(int64_t{n} * in_dim);
  cpu.Forward(params.data(), in.data(), n, 1, out.data());
  cpu.Backward(params.data(), in.data(), out.data(), dout.data(), n, 1,
               dparams.data(), with_din ? din.data() : nullptr);

  const DenseShape shape{in_dim, units, ActOf(act)};
  for (Order order : {Order::kForward, Order::kBackward}) {
    SCOPED_TRACE(OrderName(order));
    HostExec exec(order);
    std::vector<float> h_out(out.size(), kNaN), h_dparams(num_params, kNaN),
        h_din(din.size(), kNaN), h_dout = dout;
    ASSERT_TRUE(
        DenseForward(exec, shape, params.data(), in.data(), n, h_out.data())
            .ok());
    ExpectNear(out, h_out, "out");
    ASSERT_TRUE(DenseBackward(exec, shape, params.data(), in.data(),
                              h_out.data(), h_dout.data(), n, h_dparams.data(),
                              with_din ? h_din.data() : nullptr)
                    .ok());
    ExpectNear(dparams, h_dparams, "dparams");
    if (with_din) ExpectNear(din, h_din, "din");
  }
}

TEST(LayerImplTest, DenseMatchesTheCpuLayer) {
  for (Activation act : {Activation::kRelu, Activation::kSigmoid,
                         Activation::kTanh, Activation::kNone}) {
    CheckDense(13, 7, act, 9, true);
    CheckDense(5, 33, act, 1, false);
  }
}

// ---------------------------------------------------------------------------
// Conv.

struct ConvCase {
  FeatureShape in;
  ConvLayerSpec spec;
  int rows;
  int block_rows;  // 0: the layer's choice
  bool with_din;
  int dw_slice_rows = 0;  // 0: the layer's choice
};

void CheckConv(const ConvCase& c) {
  const ConvLayerSpec& s = c.spec;
  const std::string name =
      "conv " + std::to_string(c.in.channels) + "x" +
      std::to_string(c.in.time) + "x" + std::to_string(c.in.freq) + " (" +
      std::to_string(s.filters) + "," + std::to_string(s.kernel_time) + "x" +
      std::to_string(s.kernel_freq) + ",pool " + std::to_string(s.pool_time) +
      "x" + std::to_string(s.pool_freq) + "," +
      std::string(ActivationName(s.activation)) + ") rows " +
      std::to_string(c.rows) + " block " + std::to_string(c.block_rows) +
      " dW slice " + std::to_string(c.dw_slice_rows);
  SCOPED_TRACE(name);
  const ConvGeometry g = MakeConvGeometry(c.in, s);
  ASSERT_GE(g.out_time, 1);
  ASSERT_GE(g.out_freq, 1);
  const int n = c.rows;
  ConvLayer cpu(c.in, s, n, c.block_rows);
  ASSERT_EQ(cpu.out_shape().dim(), g.out_dim);
  const int64_t num_params = int64_t{s.filters} * (g.patch + 1);
  const std::vector<float> params = Random(num_params, 4, 0.3f);
  const std::vector<float> in = Random(int64_t{n} * g.in_dim, 5);
  const std::vector<float> dout = Random(int64_t{n} * g.out_dim, 6);
  std::vector<float> out(int64_t{n} * g.out_dim), dparams(num_params),
      din(int64_t{n} * g.in_dim);
  cpu.Forward(params.data(), in.data(), n, 1, out.data());
  cpu.Backward(params.data(), in.data(), out.data(), dout.data(), n, 1,
               dparams.data(), c.with_din ? din.data() : nullptr);

  const int block_rows = ConvBlockRows(g, n, c.block_rows);
  if (c.block_rows > 0) {
    EXPECT_EQ(block_rows, std::min(c.block_rows, n));
  }
  const int dw_slice = ConvDwSliceRows(g, block_rows, c.dw_slice_rows);
  if (c.dw_slice_rows > 0) {
    EXPECT_EQ(dw_slice, std::min(c.dw_slice_rows, block_rows * g.positions));
  }
  const ConvScratchSizes sizes =
      ConvScratchSizesFor(g, block_rows, n, dw_slice);
  EXPECT_EQ(sizes.dw_parts > 0, dw_slice < block_rows * g.positions);
  for (Order order : {Order::kForward, Order::kBackward}) {
    SCOPED_TRACE(OrderName(order));
    HostExec exec(order);
    std::vector<float> cols(sizes.cols, kNaN), z(sizes.z, kNaN);
    std::vector<int32_t> argmax(sizes.argmax, -1);
    std::vector<float> dw_parts(sizes.dw_parts, kNaN);
    ConvScratch scratch;
    scratch.block_rows = block_rows;
    scratch.dw_slice = dw_slice;
    scratch.cols = cols.data();
    scratch.z = z.data();
    scratch.argmax = argmax.data();
    scratch.dw_parts = sizes.dw_parts > 0 ? dw_parts.data() : nullptr;
    std::vector<float> h_out(out.size(), kNaN), h_dparams(num_params, kNaN),
        h_din(din.size(), kNaN), h_dout = dout;
    ASSERT_TRUE(
        ConvForward(exec, g, scratch, params.data(), in.data(), n, h_out.data())
            .ok());
    ExpectNear(out, h_out, "out");
    for (int32_t p : argmax) {
      ASSERT_GE(p, 0);
      ASSERT_LT(p, g.positions);
    }
    ASSERT_TRUE(ConvBackward(exec, g, scratch, params.data(), in.data(),
                             h_out.data(), h_dout.data(), n, h_dparams.data(),
                             c.with_din ? h_din.data() : nullptr)
                    .ok());
    ExpectNear(dparams, h_dparams, "dparams");
    if (c.with_din) ExpectNear(din, h_din, "din");
  }
}

TEST(LayerImplTest, ConvMatchesTheCpuLayer) {
  const Activation relu = Activation::kRelu, tanh = Activation::kTanh;
  // ConvLayerSpec{filters, kernel_time, kernel_freq, pool_time, pool_freq,
  // activation}.
  const ConvCase cases[] = {
      // The model presets' first layer: 11 x 40, 3x8, pool 1x3.
      {{1, 11, 40}, ConvLayerSpec{8, 3, 8, 1, 3, relu}, 5, 0, false},
      // Pooling in time and frequency with positions left over in both.
      {{1, 9, 17}, ConvLayerSpec{4, 3, 4, 2, 3, relu}, 7, 0, true},
      // Several input channels, several blocks (3 + 3 + 1 rows).
      {{3, 7, 9}, ConvLayerSpec{5, 3, 3, 2, 2, relu}, 7, 3, true},
      // One row per block; a sigmoid and a tanh.
      {{2, 5, 6},
       ConvLayerSpec{3, 2, 2, 1, 1, Activation::kSigmoid},
       4,
       1,
       true},
      {{2, 6, 8}, ConvLayerSpec{6, 2, 3, 3, 2, tanh}, 5, 2, true},
      // The kernel covers the whole input: one position, one window.
      {{2, 3, 4}, ConvLayerSpec{3, 3, 4, 1, 1, relu}, 3, 0, true},
      // The whole conv output in one pooling window.
      {{1, 6, 7}, ConvLayerSpec{2, 2, 2, 5, 6, Activation::kNone}, 6, 4, true},
      // A single row.
      {{1, 4, 10}, ConvLayerSpec{4, 2, 5, 1, 2, relu}, 1, 0, true},
      // The weight gradient in slices: 1,485 patch rows in 14 slices of 100
      // and one of 85; several blocks of 105 and 35 rows in slices of 7 (no
      // rest); slices of one row; a slice longer than the block.
      {{1, 11, 40}, ConvLayerSpec{8, 3, 8, 1, 3, relu}, 5, 0, false, 100},
      {{3, 7, 9}, ConvLayerSpec{5, 3, 3, 2, 2, relu}, 7, 3, true, 7},
      {{2, 6, 8}, ConvLayerSpec{6, 2, 3, 3, 2, tanh}, 5, 2, true, 1},
      {{1, 9, 17}, ConvLayerSpec{4, 3, 4, 2, 3, relu}, 7, 0, true, 5000},
  };
  for (const ConvCase& c : cases) CheckConv(c);
}

// The weight gradient's slices when not given: 2,048 patch rows, more when a
// block would have more than 32 slices, never more than the block.
TEST(LayerImplTest, ConvDwSlicesKeepLongBlocksBusyAndBounded) {
  // The --model=cnn preset's first layer: 9 x 33 = 297 positions.
  const ConvGeometry g = MakeConvGeometry(
      {1, 11, 40}, ConvLayerSpec{128, 3, 8, 1, 3, Activation::kRelu});
  ASSERT_EQ(g.positions, 297);
  EXPECT_EQ(ConvDwSliceRows(g, 5, 0), 1485);  // one slice: no split
  EXPECT_EQ(ConvDwSliceRows(g, 20, 0), 2048);
  EXPECT_EQ(ConvDwParts(20 * 297, 2048), 3);
  // 256 rows: 76,032 patch rows in 32 slices of 2,376.
  EXPECT_EQ(ConvDwSliceRows(g, 256, 0), 2376);
  EXPECT_EQ(ConvDwParts(256 * 297, 2376), 32);
  EXPECT_EQ(ConvDwSliceRows(g, 256, 100), 100);
  EXPECT_EQ(ConvDwSliceRows(g, 256, 1 << 30), 256 * 297);
  // The parts are scratch only when there are several.
  EXPECT_EQ(ConvScratchSizesFor(g, 5, 5, 1485).dw_parts, 0);
  EXPECT_EQ(ConvScratchSizesFor(g, 256, 256, 2376).dw_parts,
            int64_t{32} * 128 * 24);
}

// ---------------------------------------------------------------------------
// LSTM.

// Adds to *clipped how many cell values the forward pass clipped (read back
// from the impl's cache).
void CheckLstm(int in_dim, const LstmLayerSpec& spec, int sequences, int steps,
               bool with_din, int64_t* clipped) {
  const std::string name =
      std::string(spec.bidirectional ? "blstm(" : "lstm(") +
      std::to_string(spec.cells) + ",proj " + std::to_string(spec.projection) +
      ",clip " + std::to_string(spec.cell_clip) + ") in " +
      std::to_string(in_dim) + ", " + std::to_string(sequences) + " x " +
      std::to_string(steps);
  SCOPED_TRACE(name);
  const int n = sequences * steps;
  const LstmShape sh = MakeLstmShape(in_dim, spec);
  LstmLayer cpu(in_dim, spec, n);
  ASSERT_EQ(cpu.out_shape().dim(), sh.out_dim);
  const int64_t num_params = sh.directions * sh.direction_params;
  // Large enough weights that the cells reach the clip.
  const std::vector<float> params = Random(num_params, 7, 0.5f);
  const std::vector<float> in = Random(int64_t{n} * in_dim, 8);
  const std::vector<float> dout = Random(int64_t{n} * sh.out_dim, 9);
  std::vector<float> out(int64_t{n} * sh.out_dim), dparams(num_params),
      din(int64_t{n} * in_dim);
  cpu.Forward(params.data(), in.data(), sequences, steps, out.data());
  cpu.Backward(params.data(), in.data(), out.data(), dout.data(), sequences,
               steps, dparams.data(), with_din ? din.data() : nullptr);

  const LstmScratchSizes sizes = LstmScratchSizesFor(sh, n);
  for (Order order : {Order::kForward, Order::kBackward}) {
    SCOPED_TRACE(OrderName(order));
    HostExec exec(order);
    std::vector<float> gates[2], cell[2], tanh_c[2], hidden[2];
    LstmScratch scratch;
    for (int d = 0; d < sh.directions; ++d) {
      gates[d].assign(sizes.gates, kNaN);
      cell[d].assign(sizes.cell, kNaN);
      tanh_c[d].assign(sizes.cell, kNaN);
      hidden[d].assign(sizes.hidden, kNaN);
      scratch.cache[d] = {gates[d].data(), cell[d].data(), tanh_c[d].data(),
                          sizes.hidden > 0 ? hidden[d].data() : nullptr};
    }
    std::vector<float> dgates(sizes.dgates, kNaN), drec(sizes.drec, kNaN),
        dhidden(sizes.dhidden, kNaN), dcell(sizes.dcell, kNaN);
    scratch.dgates = dgates.data();
    scratch.drec = drec.data();
    scratch.dhidden = sizes.dhidden > 0 ? dhidden.data() : nullptr;
    scratch.dcell = dcell.data();
    std::vector<float> h_out(out.size(), kNaN), h_dparams(num_params, kNaN),
        h_din(din.size(), kNaN), h_dout = dout;
    ASSERT_TRUE(LstmForward(exec, sh, scratch, params.data(), in.data(),
                            sequences, steps, h_out.data())
                    .ok());
    ExpectNear(out, h_out, "out");
    ASSERT_TRUE(LstmBackward(exec, sh, scratch, params.data(), in.data(),
                             h_out.data(), h_dout.data(), sequences, steps,
                             h_dparams.data(),
                             with_din ? h_din.data() : nullptr)
                    .ok());
    ExpectNear(dparams, h_dparams, "dparams");
    if (with_din) ExpectNear(din, h_din, "din");
    if (order == Order::kForward && spec.cell_clip > 0) {
      for (int d = 0; d < sh.directions; ++d) {
        for (float c : cell[d]) *clipped += std::abs(c) == spec.cell_clip;
      }
    }
  }
}

TEST(LayerImplTest, LstmMatchesTheCpuLayer) {
  int64_t clipped = 0;
  // LstmLayerSpec{cells, projection, cell_clip, bidirectional}.
  // Projection and clipping, unidirectional and bidirectional.
  CheckLstm(11, LstmLayerSpec{8, 5, 0.5f, false}, 3, 5, true, &clipped);
  CheckLstm(9, LstmLayerSpec{6, 4, 0.5f, true}, 2, 6, true, &clipped);
  // Neither, as a first layer (no input gradient).
  CheckLstm(7, LstmLayerSpec{9, 0, 0.0f, false}, 4, 3, false, &clipped);
  CheckLstm(5, LstmLayerSpec{7, 0, 0.0f, true}, 3, 4, false, &clipped);
  // Clipping without projection; projection without clipping.
  CheckLstm(6, LstmLayerSpec{5, 0, 0.3f, true}, 2, 5, true, &clipped);
  CheckLstm(10, LstmLayerSpec{12, 3, 0.0f, true}, 1, 7, true, &clipped);
  // One step (no recurrent GEMM, dW_r = 0) and one sequence.
  CheckLstm(4, LstmLayerSpec{6, 3, 0.5f, true}, 5, 1, true, &clipped);
  CheckLstm(4, LstmLayerSpec{6, 0, 0.0f, false}, 1, 1, true, &clipped);
  EXPECT_GT(clipped, 0) << "no case reached the cell clip";
}

}  // namespace
}  // namespace cuda_ops
}  // namespace asgd
