// The convolutional layer's steps for the CUDA backend, on any Exec
// (layer_math.h), mirroring model/layers/conv.cc: the same shapes, parameter
// layout, pooling choices (the first maximum of a window in window order)
// and results. See model/layers/conv.h for the layer itself.
//
// Rows are processed in blocks of block_rows (so that the patch matrix stays
// bounded); a block's patch matrix has m = block rows × positions rows. Per
// block:
//   Forward:  Im2ColOp (patches [m, patch], the CPU's Im2Col), one GEMM
//             Z = W patches^T [filters, m] (filter-major, unlike the CPU's
//             [m, filters], so that pooling reads and unpooling writes
//             neighbouring positions), PoolOp: each pooled output's window
//             maximum of Z (before the bias, as the CPU does), the position
//             it came from kept in `argmax`, and out = act(max + bias),
//             channel-major.
//   Backward: once for all rows, dout ·= act'(out) in place (dpool) and
//             db = per-filter sums of dpool (ChannelSums); per block:
//             Im2ColOp again, UnpoolOp (dZ [filters, m]: dpool at each
//             window's argmax, zero elsewhere: the CPU's UnpoolRow plus its
//             zeroing of uncovered positions), dW (+)= dZ patches, and with
//             din: dPatches^T = W^T dZ [patch, m] (GEMM, into the patch
//             buffer) folded back by Col2ImOp, which then reads
//             neighbouring positions.
// The dW GEMM sums over the m rows of the block, for an output of only
// filters × patch: one GEMM of that shape has few output tiles to spread
// over a GPU's multiprocessors, so it is split over slices of dw_slice rows
// (ConvDwSliceRows), one GEMM of a strided batch each into its own part of
// dw_parts, and SumPartsOp adds the parts in slice order (fixed, so the sum
// is deterministic). A block of one slice is one GEMM straight into dW.
// The ops are gathers: each element is written by the one e that owns it, so
// no atomics and no zeroing pass are needed (pooling windows do not overlap;
// Col2ImOp sums, for each input element, the patch entries that read it).
//
// Thread-safety: pure functions and plain value types.
#ifndef ASGD_MODEL_CUDA_CONV_IMPL_H_
#define ASGD_MODEL_CUDA_CONV_IMPL_H_

#include <algorithm>
#include <climits>
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
// row first + r. count * positions * patch elements, at most INT_MAX (see
// ConvFitsIntIndices), so the index arithmetic is 32-bit; e owns cols[e].
struct Im2ColOp {
  const float* in;
  int first;
  ConvGeometry g;
  float* cols;
  ASGD_HD void operator()(int64_t e) const {
    const int i = static_cast<int>(e);
    const int plane = g.time * g.freq;
    const int kernel_area = g.kernel_time * g.kernel_freq;
    const int col = i % g.patch, rp = i / g.patch;
    const int p = rp % g.positions, r = rp / g.positions;
    const int t = p / g.conv_freq, f = p % g.conv_freq;
    const int c = col / kernel_area, rem = col % kernel_area;
    const int dt = rem / g.kernel_freq, df = rem % g.kernel_freq;
    cols[e] =
        in[(first + r) * g.in_dim + c * plane + (t + dt) * g.freq + (f + df)];
  }
};

// The CPU's PoolRow plus bias and activation, for rows [first, first +
// count): z [filters, m] (m = count * positions; column r * positions + p)
// holds the pre-activations (no bias). Element e is one pooled output (row
// r, filter k, window q): the maximum over the window in the CPU's order
// (window row i, then column j; a later value wins only when strictly
// greater), out = act(max + bias[k]) channel-major, the winning position
// into argmax (same index as out). count * out_dim elements; e owns out and
// argmax at row first + r, index e % out_dim.
struct PoolOp {
  const float* z;
  const float* bias;
  int first;
  int64_t m;
  ConvGeometry g;
  float* out;
  int32_t* argmax;
  ASGD_HD void operator()(int64_t e) const {
    const int64_t r = e / g.out_dim;
    const int rem = static_cast<int>(e % g.out_dim);
    const int k = rem / g.pooled, q = rem % g.pooled;
    const int tp = q / g.out_freq, fp = q % g.out_freq;
    const int p0 = tp * g.pool_time * g.conv_freq + fp * g.pool_freq;
    const float* zr = z + k * m + r * g.positions;
    float best = zr[p0];
    int arg = p0;
    for (int i = 0; i < g.pool_time; ++i) {
      for (int j = i == 0 ? 1 : 0; j < g.pool_freq; ++j) {
        const int p = p0 + i * g.conv_freq + j;
        const float v = zr[p];
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
// [first, first + count): dz [filters, m] (m = count * positions) gets, at
// filter k and column r * positions + p, the pooled gradient dpool of the
// window covering p when p was that window's maximum, else 0 (also for
// positions no window covers). filters * m elements, at most INT_MAX (see
// ConvFitsIntIndices); e owns dz[e].
struct UnpoolOp {
  const float* dpool;
  const int32_t* argmax;
  int first;
  int m;
  ConvGeometry g;
  float* dz;
  ASGD_HD void operator()(int64_t e) const {
    const int i = static_cast<int>(e);
    const int k = i / m, rp = i % m;
    const int p = rp % g.positions, r = rp / g.positions;
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
// of positions (ti - dt, fi - df) at patch column (c * kernel_time + dt) *
// kernel_freq + df, for every kernel offset that lands inside the conv
// output (a fixed order, so deterministic). The patch gradients are
// transposed, cols_t [patch, m] (m = count * positions), so that
// neighbouring elements read neighbouring columns. count * in_dim elements;
// e owns din at row first + r, index e % in_dim.
struct Col2ImOp {
  const float* cols_t;
  int first;
  int64_t m;
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
        sum += cols_t[col * m + position];
      }
    }
    din[(first + r) * g.in_dim + rem] = sum;
  }
};

// out[e] = (accumulate ? out[e] : 0) + parts[0][e] + ... + parts[count-1][e],
// added in that order; parts j at parts + j * size. size elements; e owns
// out[e].
struct SumPartsOp {
  const float* parts;
  int count;
  int64_t size;
  bool accumulate;
  float* out;
  ASGD_HD void operator()(int64_t e) const {
    float sum = accumulate ? out[e] : 0.0f;
    for (int j = 0; j < count; ++j) sum += parts[j * size + e];
    out[e] = sum;
  }
};

// The layer's scratch, in the Exec's memory.
struct ConvScratch {
  int block_rows = 0;         // rows per block
  int dw_slice = 0;           // patch rows per dW GEMM slice; 0: no slices
  float* cols = nullptr;      // [block_rows * positions, patch]; dPatches^T
  float* z = nullptr;         // [filters, block_rows * positions]; also dZ
  int32_t* argmax = nullptr;  // [max_rows, out_dim]
  float* dw_parts = nullptr;  // [ConvDwParts(block), filters, patch]
};

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

// Whether a block of block_rows rows keeps every GEMM size and every index
// into its patch and pre-pooling matrices within an int (the layer refuses
// blocks that do not).
inline bool ConvFitsIntIndices(const ConvGeometry& g, int block_rows) {
  return int64_t{block_rows} * g.positions * std::max(g.patch, g.filters) <=
         INT_MAX;
}

// Patch rows per slice of the dW GEMM when not given, and at most how many
// slices a block is split into then: a slice of 2,048 rows is still a long
// GEMM, and 32 parts of filters × patch stay small next to the patch matrix.
inline constexpr int kConvDwSliceRows = 2048;
inline constexpr int kConvMaxDwSlices = 32;

// Patch rows per slice of a block of block_rows rows: `requested` (> 0) or
// kConvDwSliceRows, raised so that a block has at most kConvMaxDwSlices
// slices; at most the block's rows (one slice: no split).
inline int ConvDwSliceRows(const ConvGeometry& g, int block_rows,
                           int requested) {
  const int64_t m = int64_t{block_rows} * g.positions;
  const int64_t rows =
      requested > 0
          ? requested
          : std::max<int64_t>(kConvDwSliceRows,
                              (m + kConvMaxDwSlices - 1) / kConvMaxDwSlices);
  return static_cast<int>(std::max<int64_t>(1, std::min(rows, m)));
}

// Slices of a patch matrix of m rows.
inline int64_t ConvDwParts(int64_t m, int dw_slice) {
  return (m + dw_slice - 1) / dw_slice;
}

// The elements of each ConvScratch buffer (dw_parts 0 when a block is one
// slice).
struct ConvScratchSizes {
  int64_t cols, z, argmax, dw_parts;
};
inline ConvScratchSizes ConvScratchSizesFor(const ConvGeometry& g,
                                            int block_rows, int max_rows,
                                            int dw_slice) {
  const int64_t m = int64_t{block_rows} * g.positions;
  const int64_t parts = ConvDwParts(m, dw_slice);
  return {m * g.patch, m * g.filters, int64_t{max_rows} * g.out_dim,
          parts > 1 ? parts * g.filters * g.patch : 0};
}

// dW (+)= dZ patches over a block's m patch rows (beta 0 for the first
// block, 1 after): the CPU's sgemm(T, N, filters, patch, m, dz, filters,
// cols, patch, beta, dw, patch), with dZ filter-major, in slices of
// s.dw_slice rows (see the top of this file; 0: one GEMM).
template <class Exec>
absl::Status ConvWeightGradient(Exec& x, const ConvGeometry& g,
                                const ConvScratch& s, const float* dz, int m,
                                bool accumulate, float* dw) {
  const int64_t parts = s.dw_slice > 0 ? ConvDwParts(m, s.dw_slice) : 1;
  if (parts <= 1) {
    return x.Gemm(false, false, g.filters, g.patch, m, dz, m, s.cols, g.patch,
                  accumulate ? 1.0f : 0.0f, dw, g.patch);
  }
  const int64_t size = int64_t{g.filters} * g.patch;
  const int full = m / s.dw_slice, rest = m % s.dw_slice;
  ASGD_RETURN_IF_ERROR(x.GemmStridedBatched(
      false, false, g.filters, g.patch, s.dw_slice, dz, m, s.dw_slice, s.cols,
      g.patch, int64_t{s.dw_slice} * g.patch, 0.0f, s.dw_parts, g.patch, size,
      full));
  if (rest > 0) {
    const int64_t done = int64_t{full} * s.dw_slice;
    ASGD_RETURN_IF_ERROR(x.Gemm(false, false, g.filters, g.patch, rest,
                                dz + done, m, s.cols + done * g.patch, g.patch,
                                0.0f, s.dw_parts + full * size, g.patch));
  }
  return x.ForEach(size, SumPartsOp{s.dw_parts, static_cast<int>(parts), size,
                                    accumulate, dw});
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
    // Z [filters, m] = W patches^T: the transpose of the CPU's sgemm(N, T,
    // m, filters, patch, cols, patch, w, patch, 0, z, filters).
    ASGD_RETURN_IF_ERROR(x.Gemm(false, true, g.filters, m, g.patch, w, g.patch,
                                s.cols, g.patch, 0.0f, s.z, m));
    ASGD_RETURN_IF_ERROR(
        x.ForEach(int64_t{count} * g.out_dim,
                  PoolOp{s.z, bias, first, m, g, out, s.argmax}));
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
                                   UnpoolOp{dpool, s.argmax, first, m, g, dz}));
    ASGD_RETURN_IF_ERROR(ConvWeightGradient(x, g, s, dz, m, first > 0, dw));
    if (din != nullptr) {
      // dPatches^T [patch, m] = W^T dZ into the patch buffer (the dW GEMM
      // before it has read the patches): the transpose of the CPU's
      // sgemm(N, N, m, patch, filters, dz, filters, w, patch, 0, cols,
      // patch).
      ASGD_RETURN_IF_ERROR(x.Gemm(true, false, g.patch, m, g.filters, w,
                                  g.patch, dz, m, 0.0f, s.cols, m));
      ASGD_RETURN_IF_ERROR(x.ForEach(int64_t{count} * g.in_dim,
                                     Col2ImOp{s.cols, first, m, g, din}));
    }
  }
  return absl::OkStatus();
}

}  // namespace cuda_ops
}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_CONV_IMPL_H_
