// The LSTM layer's steps for the CUDA backend, on any Exec (layer_math.h),
// one direction or two, mirroring model/layers/lstm.cc: the same equations,
// parameter layout, time-major rows, zero initial state per sequence, cell
// clipping with a zero gradient where it clipped, and bidirectional output
// [fw, bw]. See model/layers/lstm.h for the layer itself.
//
// Per direction (the backward one visits the steps from the last down):
//   Forward:  G = X W_x^T for all rows in one GEMM (the bias is added by the
//             cell pass); per step s > 0 one GEMM G_t += r_prev W_r^T over
//             the step's `sequences` rows; LstmCellForwardOp (one element
//             per sequence and cell: the four gates squashed in place, c,
//             tanh c, h); with a projection one GEMM r_t = h_t W_p^T.
//   Backward: dR = this direction's columns of dout (Copy2D); per step from
//             the last visited back: with a projection one GEMM
//             dh = dR_t W_p; LstmCellBackwardOp (gate gradients, and the
//             cell gradient carried to the step before); for s > 0 one GEMM
//             dR_prev += dG_t W_r. Then over all rows: dW_x = dG^T X,
//             db = column sums of dG, dW_r = dG^T r_prev (rows paired as on
//             the CPU), dW_p = dR^T H, din (+)= dG W_x (the second direction
//             adds to the first's).
// The cell ops use expf/tanhf; the CPU uses its own vectorized exp (about
// 2 ulp), so the two agree to rounding, not bitwise.
//
// Thread-safety: pure functions and plain value types.
#ifndef ASGD_MODEL_CUDA_LSTM_IMPL_H_
#define ASGD_MODEL_CUDA_LSTM_IMPL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "model/cuda/layer_math.h"
#include "model/model_spec.h"

namespace asgd {
namespace cuda_ops {

// One step of one direction, forward, the CPU's CellForward one cell at a
// time: element e = (b, j) for sequence b and cell j, on row = row0 + b.
// `gates` [rows, 4*cells] holds X W_x^T (+ r_prev W_r^T) and gets the
// squashed gates i, f, g, o; `prev0` is the first row of the step visited
// before (its cells are c_prev) or -1 at the first step (c_prev = 0); h goes
// to h[row * h_stride + j] (the hidden buffer, or this direction's output
// column when there is no projection). sequences * cells elements; e owns
// the four gates of cell j of its row, and cell, tanh_c and h at (row, j);
// it reads cell at (prev0 + b, j), a row no element of the pass writes.
struct LstmCellForwardOp {
  float* gates;
  const float* bias;
  float* cell;
  float* tanh_c;
  float* h;
  int64_t h_stride;
  int64_t row0;
  int64_t prev0;
  int cells;
  float clip;
  ASGD_HD void operator()(int64_t e) const {
    const int64_t g4 = int64_t{4} * cells;
    const int64_t b = e / cells;
    const int j = static_cast<int>(e % cells);
    const int64_t row = row0 + b;
    float* g = gates + row * g4;
    const float i = SigmoidF(g[j] + bias[j]);
    const float f = SigmoidF(g[cells + j] + bias[cells + j]);
    const float u = tanhf(g[2 * cells + j] + bias[2 * cells + j]);
    const float o = SigmoidF(g[3 * cells + j] + bias[3 * cells + j]);
    g[j] = i;
    g[cells + j] = f;
    g[2 * cells + j] = u;
    g[3 * cells + j] = o;
    const float c_prev = prev0 >= 0 ? cell[(prev0 + b) * cells + j] : 0.0f;
    float v = f * c_prev + i * u;
    if (clip > 0.0f) {
      // As the CPU: comparisons, not fminf/fmaxf, so that NaN stays NaN.
      v = v > clip ? clip : v;
      v = v < -clip ? -clip : v;
    }
    const float t = tanhf(v);
    cell[row * cells + j] = v;
    tanh_c[row * cells + j] = t;
    h[row * h_stride + j] = o * t;
  }
};

// One step of one direction, backward, the CPU's CellBackward one cell at a
// time: element e = (b, j), row = row0 + b. dh [sequences, cells] is dL/dh
// of the step's rows; dc [sequences, cells] dL/dc carried from the step
// visited after, replaced by what goes on to the one before; writes the
// gate pre-activation gradients of the step's rows into dgates
// [rows, 4*cells]. sequences * cells elements; e owns dc at (b, j) and the
// four gate gradients of cell j of its row.
struct LstmCellBackwardOp {
  const float* gates;
  const float* cell;
  const float* tanh_c;
  const float* dh;
  float* dc;
  float* dgates;
  int64_t row0;
  int64_t prev0;
  int cells;
  float clip;
  ASGD_HD void operator()(int64_t e) const {
    const int64_t g4 = int64_t{4} * cells;
    const float limit = clip > 0.0f ? clip : INFINITY;
    const int64_t b = e / cells;
    const int j = static_cast<int>(e % cells);
    const int64_t row = row0 + b;
    const float* g = gates + row * g4;
    const float i = g[j], f = g[cells + j], u = g[2 * cells + j],
                o = g[3 * cells + j];
    const float t = tanh_c[row * cells + j];
    const float c_prev = prev0 >= 0 ? cell[(prev0 + b) * cells + j] : 0.0f;
    const float dhv = dh[b * cells + j];
    float d = dhv * o * (1.0f - t * t) + dc[b * cells + j];
    d = fabsf(cell[row * cells + j]) < limit ? d : 0.0f;  // clipped: none
    float* dg = dgates + row * g4;
    dg[j] = d * u * i * (1.0f - i);
    dg[cells + j] = d * c_prev * f * (1.0f - f);
    dg[2 * cells + j] = d * i * (1.0f - u * u);
    dg[3 * cells + j] = dhv * t * o * (1.0f - o);
    dc[b * cells + j] = d * f;
  }
};

struct LstmShape {
  int in_dim = 0;
  int cells = 0;
  int projection = 0;  // 0: none
  int rec = 0;         // projection or cells
  float cell_clip = 0.0f;
  int directions = 1;
  int out_dim = 0;  // directions * rec
  int64_t direction_params = 0;
};

inline LstmShape MakeLstmShape(int in_dim, const LstmLayerSpec& spec) {
  LstmShape s;
  s.in_dim = in_dim;
  s.cells = spec.cells;
  s.projection = spec.projection;
  s.rec = spec.projection > 0 ? spec.projection : spec.cells;
  s.cell_clip = spec.cell_clip;
  s.directions = spec.bidirectional ? 2 : 1;
  s.out_dim = s.directions * s.rec;
  s.direction_params = int64_t{4} * s.cells * (in_dim + s.rec + 1) +
                       int64_t{s.projection} * s.cells;
  return s;
}

// What Forward keeps of one direction, [max_rows, ...] each (as the CPU),
// in the Exec's memory.
struct LstmCache {
  float* gates = nullptr;   // [4*cells]: i, f, g, o after squashing
  float* cell = nullptr;    // [cells]: c (clipped)
  float* tanh_c = nullptr;  // [cells]: tanh(c)
  float* hidden = nullptr;  // [cells]: h (only with a projection)
};

// The layer's scratch: a cache per direction and the backward buffers.
struct LstmScratch {
  LstmCache cache[2];
  float* dgates = nullptr;   // [max_rows, 4*cells]
  float* drec = nullptr;     // [max_rows, rec]: dL/dr of every row
  float* dhidden = nullptr;  // [max_rows, cells]: dL/dh of one step
  float* dcell = nullptr;    // [max_rows, cells]: dL/dc carried back
};

// The elements of each LstmScratch buffer (of each direction's cache).
struct LstmScratchSizes {
  int64_t gates, cell, hidden;  // per direction, as LstmCache
  int64_t dgates, drec, dhidden, dcell;
};
inline LstmScratchSizes LstmScratchSizesFor(const LstmShape& sh, int max_rows) {
  const int64_t rows = max_rows;
  const int64_t projected = sh.projection > 0 ? rows * sh.cells : 0;
  return {rows * 4 * sh.cells, rows * sh.cells, projected,
          rows * 4 * sh.cells, rows * sh.rec,   projected,
          rows * sh.cells};
}

// The row block of the step that direction `dir` visits s-th.
inline int LstmStepAt(int dir, int s, int steps) {
  return dir == 0 ? s : steps - 1 - s;
}

template <class Exec>
absl::Status LstmForwardDirection(Exec& x, const LstmShape& sh, int dir,
                                  const LstmCache& cache, const float* params,
                                  const float* in, int sequences, int steps,
                                  float* out) {
  const int n = sequences * steps;
  const int g4 = 4 * sh.cells;
  const float* w_x = params;
  const float* w_r = w_x + int64_t{g4} * sh.in_dim;
  const float* bias = w_r + int64_t{g4} * sh.rec;
  const float* w_p = bias + g4;
  float* gates = cache.gates;
  // G = X W_x^T for every row (the CPU starts G at the bias and adds this
  // with beta 1; here the cell pass adds the bias).
  ASGD_RETURN_IF_ERROR(x.Gemm(false, true, n, g4, sh.in_dim, in, sh.in_dim, w_x,
                              sh.in_dim, 0.0f, gates, g4));
  float* r_out = out + int64_t{dir} * sh.rec;  // this direction's column
  for (int s = 0; s < steps; ++s) {
    const int64_t row0 = int64_t{LstmStepAt(dir, s, steps)} * sequences;
    const int64_t prev0 =
        s > 0 ? int64_t{LstmStepAt(dir, s - 1, steps)} * sequences : -1;
    if (s > 0) {
      // G_t += r_prev W_r^T: the CPU's sgemm(N, T, sequences, g4, rec,
      // r_out + prev0 * out_dim, out_dim, w_r, rec, 1, g, g4).
      ASGD_RETURN_IF_ERROR(x.Gemm(false, true, sequences, g4, sh.rec,
                                  r_out + prev0 * sh.out_dim, sh.out_dim, w_r,
                                  sh.rec, 1.0f, gates + row0 * g4, g4));
    }
    float* h = sh.projection > 0 ? cache.hidden : r_out;
    const int64_t h_stride = sh.projection > 0 ? sh.cells : sh.out_dim;
    ASGD_RETURN_IF_ERROR(x.ForEach(
        int64_t{sequences} * sh.cells,
        LstmCellForwardOp{gates, bias, cache.cell, cache.tanh_c, h, h_stride,
                          row0, prev0, sh.cells, sh.cell_clip}));
    if (sh.projection > 0) {
      // r = h W_p^T for this step's rows: the CPU's sgemm(N, T, sequences,
      // projection, cells, hidden + row0 * cells, cells, w_p, cells, 0,
      // r_out + row0 * out_dim, out_dim).
      ASGD_RETURN_IF_ERROR(x.Gemm(false, true, sequences, sh.projection,
                                  sh.cells, cache.hidden + row0 * sh.cells,
                                  sh.cells, w_p, sh.cells, 0.0f,
                                  r_out + row0 * sh.out_dim, sh.out_dim));
    }
  }
  return absl::OkStatus();
}

template <class Exec>
absl::Status LstmBackwardDirection(Exec& x, const LstmShape& sh, int dir,
                                   const LstmScratch& scratch,
                                   const float* params, const float* in,
                                   const float* out, const float* dout,
                                   int sequences, int steps, float* dparams,
                                   float* din) {
  const int n = sequences * steps;
  const int g4 = 4 * sh.cells;
  const float* w_x = params;
  const float* w_r = w_x + int64_t{g4} * sh.in_dim;
  const float* w_p = w_r + int64_t{g4} * sh.rec + g4;
  float* dw_x = dparams;
  float* dw_r = dw_x + int64_t{g4} * sh.in_dim;
  float* dbias = dw_r + int64_t{g4} * sh.rec;
  float* dw_p = dbias + g4;
  const LstmCache& cache = scratch.cache[dir];
  float* dgates = scratch.dgates;
  float* drec = scratch.drec;
  float* dc = scratch.dcell;

  // dL/dr of every row starts as this direction's columns of dout.
  ASGD_RETURN_IF_ERROR(x.Copy2D(drec, sh.rec, dout + int64_t{dir} * sh.rec,
                                sh.out_dim, sh.rec, n));
  ASGD_RETURN_IF_ERROR(x.Zero(dc, int64_t{sequences} * sh.cells));
  for (int s = steps - 1; s >= 0; --s) {
    const int64_t row0 = int64_t{LstmStepAt(dir, s, steps)} * sequences;
    const int64_t prev0 =
        s > 0 ? int64_t{LstmStepAt(dir, s - 1, steps)} * sequences : -1;
    const float* dh = drec + row0 * sh.rec;
    if (sh.projection > 0) {
      // dh = dR_t W_p: the CPU's sgemm(N, N, sequences, cells, projection,
      // drec + row0 * rec, rec, w_p, cells, 0, dhidden, cells).
      ASGD_RETURN_IF_ERROR(x.Gemm(false, false, sequences, sh.cells,
                                  sh.projection, drec + row0 * sh.rec, sh.rec,
                                  w_p, sh.cells, 0.0f, scratch.dhidden,
                                  sh.cells));
      dh = scratch.dhidden;
    }
    ASGD_RETURN_IF_ERROR(x.ForEach(
        int64_t{sequences} * sh.cells,
        LstmCellBackwardOp{cache.gates, cache.cell, cache.tanh_c, dh, dc,
                           dgates, row0, prev0, sh.cells, sh.cell_clip}));
    if (s > 0) {
      // dR_prev += dG_t W_r: the CPU's sgemm(N, N, sequences, rec, g4, dg,
      // g4, w_r, rec, 1, drec + prev0 * rec, rec).
      ASGD_RETURN_IF_ERROR(x.Gemm(false, false, sequences, sh.rec, g4,
                                  dgates + row0 * g4, g4, w_r, sh.rec, 1.0f,
                                  drec + prev0 * sh.rec, sh.rec));
    }
  }

  // Weight gradients over all rows. dW_x = dG^T X: sgemm(T, N, g4, in, n,
  // dgates, g4, in, in_dim, 0, dw_x, in_dim).
  ASGD_RETURN_IF_ERROR(x.Gemm(true, false, g4, sh.in_dim, n, dgates, g4, in,
                              sh.in_dim, 0.0f, dw_x, sh.in_dim));
  ASGD_RETURN_IF_ERROR(x.ColumnSums(dgates, n, g4, dbias));
  // dW_r = sum_t dG_t^T r_prev(t): the forward direction pairs rows [S, n)
  // of dG with rows [0, n - S) of r, the backward one the reverse.
  const int paired = n - sequences;
  if (paired > 0) {
    const int64_t shift = sequences;
    const float* dg0 = dir == 0 ? dgates + shift * g4 : dgates;
    const float* r0 =
        out + int64_t{dir} * sh.rec + (dir == 0 ? 0 : shift * sh.out_dim);
    ASGD_RETURN_IF_ERROR(x.Gemm(true, false, g4, sh.rec, paired, dg0, g4, r0,
                                sh.out_dim, 0.0f, dw_r, sh.rec));
  } else {
    ASGD_RETURN_IF_ERROR(x.Zero(dw_r, int64_t{g4} * sh.rec));
  }
  if (sh.projection > 0) {
    // dW_p = dR^T H: sgemm(T, N, projection, cells, n, drec, rec, hidden,
    // cells, 0, dw_p, cells).
    ASGD_RETURN_IF_ERROR(x.Gemm(true, false, sh.projection, sh.cells, n, drec,
                                sh.rec, cache.hidden, sh.cells, 0.0f, dw_p,
                                sh.cells));
  }
  if (din != nullptr) {
    // dX (+)= dG W_x: sgemm(N, N, n, in, g4, dgates, g4, w_x, in_dim,
    // dir == 0 ? 0 : 1, din, in_dim).
    ASGD_RETURN_IF_ERROR(x.Gemm(false, false, n, sh.in_dim, g4, dgates, g4, w_x,
                                sh.in_dim, dir == 0 ? 0.0f : 1.0f, din,
                                sh.in_dim));
  }
  return absl::OkStatus();
}

template <class Exec>
absl::Status LstmForward(Exec& x, const LstmShape& sh,
                         const LstmScratch& scratch, const float* params,
                         const float* in, int sequences, int steps,
                         float* out) {
  for (int d = 0; d < sh.directions; ++d) {
    ASGD_RETURN_IF_ERROR(LstmForwardDirection(x, sh, d, scratch.cache[d],
                                              params + d * sh.direction_params,
                                              in, sequences, steps, out));
  }
  return absl::OkStatus();
}

template <class Exec>
absl::Status LstmBackward(Exec& x, const LstmShape& sh,
                          const LstmScratch& scratch, const float* params,
                          const float* in, const float* out, const float* dout,
                          int sequences, int steps, float* dparams,
                          float* din) {
  for (int d = 0; d < sh.directions; ++d) {
    ASGD_RETURN_IF_ERROR(LstmBackwardDirection(
        x, sh, d, scratch, params + d * sh.direction_params, in, out, dout,
        sequences, steps, dparams + d * sh.direction_params, din));
  }
  return absl::OkStatus();
}

}  // namespace cuda_ops
}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_LSTM_IMPL_H_
