// The convolutional layer's steps for the CUDA backend, on any Exec
// (layer_math.h), mirroring model/layers/conv.cc: the same shapes, parameter
// layout, pooling choices (the first maximum of a window in window order)
// and results. See model/layers/conv.h for the layer itself.
//
// Rows are processed in blocks of block_rows (so that the patch matrix stays
// bounded); per block:
//   Forward:  Im2ColOp (patches [rows * positions, patch], the CPU's
//             Im2Col), one GEMM Z = patches W^T [rows * positions, filters],
//             PoolOp: each pooled output's window maximum of Z (before the
//             bias, as the CPU does), the position it came from kept in
//             `argmax`, and out = act(max + bias), channel-major.
//   Backward: once for all rows, dout ·= act'(out) in place (dpool) and
//             db = per-filter sums of dpool (ChannelSums); per block:
//             Im2ColOp again, UnpoolOp (dZ: dpool at each window's argmax,
//             zero elsewhere: the CPU's UnpoolRow plus its zeroing of
//             uncovered positions), dW (+)= dZ^T patches (GEMM, accumulated
//             over blocks), and with din: dPatches = dZ W (GEMM, into the
//             patch buffer) folded back by Col2ImOp.
// The ops are gathers: each element is written by the one e that owns it, so
// no atomics and no zeroing pass are needed (pooling windows do not overlap;
// Col2ImOp sums, for each input element, the patch entries that read it).
//
// Thread-safety: pure functions and plain value types.
#ifndef ASGD_MODEL_CUDA_CONV_IMPL_H_
#define ASGD_MODEL_CUDA_CONV_IMPL_H_

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "model/cuda/layer_math.h"
#include "model/model_spec.h"

namespace asgd {
namespace cuda_ops {

// The sizes every step of the layer needs. Names as in model/layers/conv.cc.
struct ConvGeometry {
  int channels, time, freq;  // input row: channels × time × freq
  int kernel_time, kernel_freq;
  int filters;
  int pool_time, pool_freq;
  int conv_time, conv_freq;  // before pooling
  int positions;             // conv_time * conv_freq
  int patch;                 // channels * kernel_time * kernel_freq
  int out_time, out_freq;    // after pooling
  int pooled;                // out_time * out_freq (per filter)
  int64_t in_dim, out_dim;   // floats per input / output row
  Act act;
};

inline ConvGeometry MakeConvGeometry(const FeatureShape& in,
                                     const ConvLayerSpec& spec) {
  ConvGeometry g;
  g.channels = in.channels;
  g.time = in.time;
  g.freq = in.freq;
  g.kernel_time = spec.kernel_time;
  g.kernel_freq = spec.kernel_freq;
  g.filters = spec.filters;
  g.pool_time = spec.pool_time;
  g.pool_freq = spec.pool_freq;
  g.conv_time = in.time - spec.kernel_time + 1;
  g.conv_freq = in.freq - spec.kernel_freq + 1;
  g.positions = g.conv_time * g.conv_freq;
  g.patch = in.channels * spec.kernel_time * spec.kernel_freq;
  g.out_time = g.conv_time / spec.pool_time;
  g.out_freq = g.conv_freq / spec.pool_freq;
  g.pooled = g.out_time * g.out_freq;
  g.in_dim = in.dim();
  g.out_dim = int64_t{spec.filters} * g.pooled;
  g.act = ActOf(spec.activation);
  return g;
}

// The CPU's Im2Col for rows [first, first + count): cols [count * positions,
// patch], row r * positions + t * conv_freq + f holding, at column
// (c * kernel_time + dt) * kernel_freq + df, input (c, t + dt, f + df) of
// row first + r. count * positions * patch elements; e owns cols[e].
struct Im2ColOp {
  const float* in;
  int first;
  ConvGeometry g;
  float* cols;
  ASGD_HD void operator()(int64_t e) const {
    const int64_t plane = int64_t{g.time} * g.freq;
    const int kernel_area = g.kernel_time * g.kernel_freq;
    const int col = static_cast<int>(e % g.patch);
    const int64_t rp = e / g.patch;
    const int p = static_cast<int>(rp % g.positions);
    const int64_t r = rp / g.positions;
    const int t = p / g.conv_freq, f = p % g.conv_freq;
    const int c = col / kernel_area, rem = col % kernel_area;
    const int dt = rem / g.kernel_freq, df = rem % g.kernel_freq;
    cols[e] = in[(first + r) * g.in_dim + c * plane + int64_t{t + dt} * g.freq +
                 (f + df)];
  }
};

// The CPU's PoolRow plus bias and activation, for rows [first, first +
// count): z [count * positions, filters] holds the pre-activations (no
// bias). Element e is one pooled output (row r, filter k, window q): the
// maximum over the window in the CPU's order (window row i, then column j;
// a later value wins only when strictly greater), out = act(max + bias[k])
// channel-major, the winning position into argmax (same index as out).
// count * out_dim elements; e owns out and argmax at row first + r, index
// e % out_dim.
struct PoolOp {
  const float* z;
  const float* bias;
  int first;
  ConvGeometry g;
  float* out;
  int32_t* argmax;
  ASGD_HD void operator()(int64_t e) const {
    const int64_t r = e / g.out_dim;
    const int rem = static_cast<int>(e % g.out_dim);
    const int k = rem / g.pooled, q = rem % g.pooled;
    const int tp = q / g.out_freq, fp = q % g.out_freq;
    const int p0 = tp * g.pool_time * g.conv_freq + fp * g.pool_freq;
    const float* zr = z + r * g.positions * g.filters;
    float best = zr[int64_t{p0} * g.filters + k];
    int arg = p0;
    for (int i = 0; i < g.pool_time; ++i) {
      for (int j = i == 0 ? 1 : 0; j < g.pool_freq; ++j) {
        const int p = p0 + i * g.conv_freq + j;
        const float v = zr[int64_t{p} * g.filters + k];
        if (v > best) {
          best = v;
          arg = p;
        }
      }
    }
    const int64_t o = (first + r) * g.out_dim + rem;
    out[o] = Activate(best + bias[k], g.act);
    argmax[o] = arg;
  }
};

// The CPU's UnpoolRow and its zeroing of uncovered positions, for rows
// [first, first + count): dz [count * positions, filters] gets, at position
// p and filter k, the pooled gradient dpool of the window covering p when p
// was that window's maximum, else 0 (also for positions no window covers).
// count * positions * filters elements; e owns dz[e].
struct UnpoolOp {
  const float* dpool;
  const int32_t* argmax;
  int first;
  ConvGeometry g;
  float* dz;
  ASGD_HD void operator()(int64_t e) const {
    const int k = static_cast<int>(e % g.filters);
    const int64_t rp = e / g.filters;
    const int p = static_cast<int>(rp % g.positions);
    const int64_t r = rp / g.positions;
    const int t = p / g.conv_freq, f = p % g.conv_freq;
    const int tp = t / g.pool_time, fp = f / g.pool_freq;
    float v = 0.0f;
    if (tp < g.out_time && fp < g.out_freq) {
      const int64_t o = (first + r) * g.out_dim + int64_t{k} * g.pooled +
                        tp * g.out_freq + fp;
      if (argmax[o] == p) v = dpool[o];
    }
    dz[e] = v;
  }
};

// The CPU's zeroing of din and Col2ImAdd, as a gather: input element (c, ti,
// fi) of row first + r is the sum of the patch gradients that read it, those
// of positions (ti - dt, fi - df) at column (c * kernel_time + dt) *
// kernel_freq + df, for every kernel offset that lands inside the conv
// output (a fixed order, so deterministic). count * in_dim elements; e owns
// din at row first + r, index e % in_dim.
struct Col2ImOp {
  const float* cols;
  int first;
  ConvGeometry g;
  float* din;
  ASGD_HD void operator()(int64_t e) const {
    const int plane = g.time * g.freq;
    const int64_t r = e / g.in_dim;
    const int rem = static_cast<int>(e % g.in_dim);
    const int c = rem / plane, tf = rem % plane;
    const int ti = tf / g.freq, fi = tf % g.freq;
    float sum = 0.0f;
    for (int dt = 0; dt < g.kernel_time; ++dt) {
      const int t = ti - dt;
      if (t < 0 || t >= g.conv_time) continue;
      for (int df = 0; df < g.kernel_freq; ++df) {
        const int f = fi - df;
        if (f < 0 || f >= g.conv_freq) continue;
        const int64_t position = r * g.positions + t * g.conv_freq + f;
        const int col = (c * g.kernel_time + dt) * g.kernel_freq + df;
        sum += cols[position * g.patch + col];
      }
    }
    din[(first + r) * g.in_dim + rem] = sum;
  }
};

// The layer's scratch, in the Exec's memory.
struct ConvScratch {
  int block_rows = 0;         // rows per block
  float* cols = nullptr;      // [block_rows * positions, patch]
  float* z = nullptr;         // [block_rows * positions, filters]; also dZ
  int32_t* argmax = nullptr;  // [max_rows, out_dim]
};

// The elements of each ConvScratch buffer.
struct ConvScratchSizes {
  int64_t cols, z, argmax;
};
inline ConvScratchSizes ConvScratchSizesFor(const ConvGeometry& g,
                                            int block_rows, int max_rows) {
  return {int64_t{block_rows} * g.positions * g.patch,
          int64_t{block_rows} * g.positions * g.filters,
          int64_t{max_rows} * g.out_dim};
}

// Upper bound on the floats of one block's patch or pre-pooling matrix
// (64 MiB each) when the block size is not given.
inline constexpr int64_t kConvBlockFloats = int64_t{1} << 24;

// Rows per block: `requested` (> 0) or as many as fit kConvBlockFloats, at
// least 1, at most max_rows.
inline int ConvBlockRows(const ConvGeometry& g, int max_rows, int requested) {
  const int64_t per_row = int64_t{g.positions} * std::max(g.patch, g.filters);
  int64_t rows = requested > 0
                     ? requested
                     : std::max<int64_t>(1, kConvBlockFloats / per_row);
  return static_cast<int>(std::min<int64_t>(rows, max_rows));
}

template <class Exec>
absl::Status ConvForward(Exec& x, const ConvGeometry& g, const ConvScratch& s,
                         const float* params, const float* in, int n,
                         float* out) {
  const float* w = params;
  const float* bias = params + int64_t{g.filters} * g.patch;
  for (int first = 0; first < n; first += s.block_rows) {
    const int count = std::min(s.block_rows, n - first);
    const int m = count * g.positions;
    ASGD_RETURN_IF_ERROR(
        x.ForEach(int64_t{m} * g.patch, Im2ColOp{in, first, g, s.cols}));
    // Z [positions, filters] per row = patches W^T: the CPU's sgemm(N, T, m,
    // filters, patch, cols, patch, w, patch, 0, z, filters).
    ASGD_RETURN_IF_ERROR(x.Gemm(false, true, m, g.filters, g.patch, s.cols,
                                g.patch, w, g.patch, 0.0f, s.z, g.filters));
    ASGD_RETURN_IF_ERROR(x.ForEach(int64_t{count} * g.out_dim,
                                   PoolOp{s.z, bias, first, g, out, s.argmax}));
  }
  return absl::OkStatus();
}

template <class Exec>
absl::Status ConvBackward(Exec& x, const ConvGeometry& g, const ConvScratch& s,
                          const float* params, const float* in,
                          const float* out, float* dout, int n, float* dparams,
                          float* din) {
  const float* w = params;
  float* dw = dparams;
  float* db = dparams + int64_t{g.filters} * g.patch;
  // dpool = dout · act'(out) for every row at once, in place; db = its sums
  // per filter (the CPU adds them up row by row).
  float* dpool = dout;
  if (g.act != Act::kIdentity) {
    ASGD_RETURN_IF_ERROR(x.ForEach(int64_t{n} * g.out_dim,
                                   ActivationBackwardOp{dpool, out, g.act}));
  }
  ASGD_RETURN_IF_ERROR(x.ChannelSums(dpool, n, g.filters, g.pooled, db));
  for (int first = 0; first < n; first += s.block_rows) {
    const int count = std::min(s.block_rows, n - first);
    const int m = count * g.positions;
    ASGD_RETURN_IF_ERROR(
        x.ForEach(int64_t{m} * g.patch, Im2ColOp{in, first, g, s.cols}));
    float* dz = s.z;
    ASGD_RETURN_IF_ERROR(x.ForEach(int64_t{m} * g.filters,
                                   UnpoolOp{dpool, s.argmax, first, g, dz}));
    // dW (+)= dZ^T patches: the CPU's sgemm(T, N, filters, patch, m, dz,
    // filters, cols, patch, first == 0 ? 0 : 1, dw, patch).
    ASGD_RETURN_IF_ERROR(x.Gemm(true, false, g.filters, g.patch, m, dz,
                                g.filters, s.cols, g.patch,
                                first == 0 ? 0.0f : 1.0f, dw, g.patch));
    if (din != nullptr) {
      // dPatches = dZ W into the patch buffer (the dW GEMM before it has
      // read the patches): the CPU's sgemm(N, N, m, patch, filters, dz,
      // filters, w, patch, 0, cols, patch).
      ASGD_RETURN_IF_ERROR(x.Gemm(false, false, m, g.patch, g.filters, dz,
                                  g.filters, w, g.patch, 0.0f, s.cols,
                                  g.patch));
      ASGD_RETURN_IF_ERROR(x.ForEach(int64_t{count} * g.in_dim,
                                     Col2ImOp{s.cols, first, g, din}));
    }
  }
  return absl::OkStatus();
}

}  // namespace cuda_ops
}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_CONV_IMPL_H_
