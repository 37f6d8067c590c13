#include "model/layers/lstm.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace asgd {
namespace {

// The element-wise passes are compiled for AVX2/FMA (x86-64-v3) as well as
// the baseline; the loader picks the best one for the CPU.
#define ASGD_LSTM_CLONES \
  __attribute__((target_clones("arch=x86-64-v3", "default")))

// exp(x) to about 2 ulp for x in [-87, 88] (clamped outside; NaN stays
// NaN), written so that loops over it vectorize: round x·log2(e) to n with
// the 1.5·2^23 trick, a degree-6 polynomial for exp(x - n·ln 2), and 2^n
// built in the exponent bits.
inline float Exp(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  constexpr float kRound = 12582912.0f;  // 1.5 · 2^23
  const float v = x * 1.44269504088896341f + kRound;
  const float n = v - kRound;
  // ln 2 split in two so that n · kLn2Hi is exact.
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));  // the low bits of v hold n
  bits = (bits + 127u) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return y * scale;
}

inline float Sigmoid(float x) { return 1.0f / (1.0f + Exp(-x)); }

// tanh(x) = 2 sigmoid(2x) - 1 (absolute error about 1e-7).
inline float Tanh(float x) { return 2.0f / (1.0f + Exp(-2.0f * x)) - 1.0f; }

// One row of one step, forward: `g` holds the gate pre-activations [i f g o]
// (4n) and receives their squashed values; c, tanh(c) and h are written.
ASGD_LSTM_CLONES void CellForward(int n, float clip,
                                  const float* __restrict c_prev,
                                  float* __restrict g, float* __restrict c,
                                  float* __restrict tc, float* __restrict h) {
  for (int j = 0; j < 2 * n; ++j) g[j] = Sigmoid(g[j]);
  float* gg = g + 2 * n;
  for (int j = 0; j < n; ++j) gg[j] = Tanh(gg[j]);
  float* go = g + 3 * n;
  for (int j = 0; j < n; ++j) go[j] = Sigmoid(go[j]);
  const float* gi = g;
  const float* gf = g + n;
  if (clip > 0.0f) {
    for (int j = 0; j < n; ++j) {
      float v = gf[j] * c_prev[j] + gi[j] * gg[j];
      v = v > clip ? clip : v;  // (NaN stays NaN)
      c[j] = v < -clip ? -clip : v;
    }
  } else {
    for (int j = 0; j < n; ++j) c[j] = gf[j] * c_prev[j] + gi[j] * gg[j];
  }
  for (int j = 0; j < n; ++j) {
    tc[j] = Tanh(c[j]);
    h[j] = go[j] * tc[j];
  }
}

// One row of one step, backward: from dL/dh (`dh`) and dL/dc carried from
// the next step (`dc`, replaced by what goes on to the previous step),
// writes the gate pre-activation gradients `dg` [4n].
ASGD_LSTM_CLONES void CellBackward(int n, float clip,
                                   const float* __restrict g,
                                   const float* __restrict c,
                                   const float* __restrict tc,
                                   const float* __restrict c_prev,
                                   const float* __restrict dh,
                                   float* __restrict dc,
                                   float* __restrict dg) {
  const float* gi = g;
  const float* gf = g + n;
  const float* gg = g + 2 * n;
  const float* go = g + 3 * n;
  const float limit = clip > 0.0f ? clip : INFINITY;
  for (int j = 0; j < n; ++j) {
    const float o = go[j], t = tc[j], i = gi[j], f = gf[j], u = gg[j];
    float d = dh[j] * o * (1.0f - t * t) + dc[j];
    d = std::abs(c[j]) < limit ? d : 0.0f;  // clipped: no gradient
    dg[j] = d * u * i * (1.0f - i);
    dg[n + j] = d * c_prev[j] * f * (1.0f - f);
    dg[2 * n + j] = d * i * (1.0f - u * u);
    dg[3 * n + j] = dh[j] * t * o * (1.0f - o);
    dc[j] = d * f;
  }
}

}  // namespace

LstmLayer::LstmLayer(int in_dim, const LstmLayerSpec& spec, int max_rows)
    : in_dim_(in_dim),
      cells_(spec.cells),
      projection_(spec.projection),
      rec_(spec.projection > 0 ? spec.projection : spec.cells),
      cell_clip_(spec.cell_clip),
      directions_(spec.bidirectional ? 2 : 1),
      out_dim_(directions_ * rec_),
      direction_params_(int64_t{4} * cells_ * (in_dim + rec_ + 1) +
                        int64_t{projection_} * cells_),
      zeros_(cells_, 0.0f),
      dgates_(int64_t{max_rows} * 4 * cells_),
      drec_(int64_t{max_rows} * rec_),
      dhidden_(projection_ > 0 ? int64_t{max_rows} * cells_ : 0),
      dcell_(int64_t{max_rows} * cells_) {
  for (int d = 0; d < directions_; ++d) {
    Cache& c = cache_[d];
    c.gates.resize(int64_t{max_rows} * 4 * cells_);
    c.cell.resize(int64_t{max_rows} * cells_);
    c.tanh_c.resize(int64_t{max_rows} * cells_);
    if (projection_ > 0) c.hidden.resize(int64_t{max_rows} * cells_);
  }
}

void LstmLayer::Forward(const float* params, const float* in, int sequences,
                        int steps, float* out) {
  for (int d = 0; d < directions_; ++d) {
    ForwardDirection(d, params + DirectionOffset(d), in, sequences, steps,
                     out);
  }
}

void LstmLayer::Backward(const float* params, const float* in,
                         const float* out, const float* dout, int sequences,
                         int steps, float* dparams, float* din) {
  for (int d = 0; d < directions_; ++d) {
    BackwardDirection(d, params + DirectionOffset(d), in, out, dout, sequences,
                      steps, dparams + DirectionOffset(d), din);
  }
}

void LstmLayer::ForwardDirection(int dir, const float* params, const float* in,
                                 int sequences, int steps, float* out) {
  const int n = sequences * steps;
  const int g4 = 4 * cells_;
  const float* w_x = params;
  const float* w_r = w_x + int64_t{g4} * in_dim_;
  const float* bias = w_r + int64_t{g4} * rec_;
  const float* w_p = bias + g4;
  Cache& cache = cache_[dir];
  float* gates = cache.gates.data();
  // The input part of every step at once: G = bias + X W_x^T.
  for (int i = 0; i < n; ++i) std::copy(bias, bias + g4, gates + int64_t{i} * g4);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, g4, in_dim_, 1.0f, in,
              in_dim_, w_x, in_dim_, 1.0f, gates, g4);
  float* r_out = out + int64_t{dir} * rec_;  // this direction's output column
  for (int s = 0; s < steps; ++s) {
    const int64_t row0 = int64_t{StepAt(dir, s, steps)} * sequences;
    const int64_t prev0 =
        s > 0 ? int64_t{StepAt(dir, s - 1, steps)} * sequences : -1;
    float* g = gates + row0 * g4;
    if (s > 0) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, sequences, g4, rec_,
                  1.0f, r_out + prev0 * out_dim_, out_dim_, w_r, rec_, 1.0f, g,
                  g4);
    }
    for (int b = 0; b < sequences; ++b) {
      const int64_t row = row0 + b;
      const float* c_prev =
          s > 0 ? cache.cell.data() + (prev0 + b) * cells_ : zeros_.data();
      float* h = projection_ > 0 ? cache.hidden.data() + row * cells_
                                 : r_out + row * out_dim_;
      CellForward(cells_, cell_clip_, c_prev, g + int64_t{b} * g4,
                  cache.cell.data() + row * cells_,
                  cache.tanh_c.data() + row * cells_, h);
    }
    if (projection_ > 0) {
      // r = h W_p^T for this step's rows.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, sequences,
                  projection_, cells_, 1.0f,
                  cache.hidden.data() + row0 * cells_, cells_, w_p, cells_,
                  0.0f, r_out + row0 * out_dim_, out_dim_);
    }
  }
}

void LstmLayer::BackwardDirection(int dir, const float* params,
                                  const float* in, const float* out,
                                  const float* dout, int sequences, int steps,
                                  float* dparams, float* din) {
  const int n = sequences * steps;
  const int g4 = 4 * cells_;
  const float* w_x = params;
  const float* w_r = w_x + int64_t{g4} * in_dim_;
  const float* w_p = w_r + int64_t{g4} * rec_ + g4;
  float* dw_x = dparams;
  float* dw_r = dw_x + int64_t{g4} * in_dim_;
  float* dbias = dw_r + int64_t{g4} * rec_;
  float* dw_p = dbias + g4;
  const Cache& cache = cache_[dir];
  const float* gates = cache.gates.data();
  float* dgates = dgates_.data();
  float* drec = drec_.data();
  float* dc = dcell_.data();

  // dL/dr of every row starts as this direction's part of dout; each step
  // adds the recurrent gradient into the step visited before it.
  for (int i = 0; i < n; ++i) {
    const float* src = dout + int64_t{i} * out_dim_ + int64_t{dir} * rec_;
    std::copy(src, src + rec_, drec + int64_t{i} * rec_);
  }
  std::fill(dc, dc + int64_t{sequences} * cells_, 0.0f);
  for (int s = steps - 1; s >= 0; --s) {
    const int64_t row0 = int64_t{StepAt(dir, s, steps)} * sequences;
    const int64_t prev0 =
        s > 0 ? int64_t{StepAt(dir, s - 1, steps)} * sequences : -1;
    const float* dh = drec + row0 * rec_;
    if (projection_ > 0) {
      // dh = dr W_p.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, sequences, cells_,
                  projection_, 1.0f, drec + row0 * rec_, rec_, w_p, cells_,
                  0.0f, dhidden_.data(), cells_);
      dh = dhidden_.data();
    }
    float* dg = dgates + row0 * g4;
    for (int b = 0; b < sequences; ++b) {
      const int64_t row = row0 + b;
      const float* c_prev =
          s > 0 ? cache.cell.data() + (prev0 + b) * cells_ : zeros_.data();
      CellBackward(cells_, cell_clip_, gates + row * g4,
                   cache.cell.data() + row * cells_,
                   cache.tanh_c.data() + row * cells_, c_prev,
                   dh + int64_t{b} * cells_,
                   dc + int64_t{b} * cells_, dg + int64_t{b} * g4);
    }
    if (s > 0) {
      // dr_prev += dG W_r.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, sequences, rec_,
                  g4, 1.0f, dg, g4, w_r, rec_, 1.0f, drec + prev0 * rec_,
                  rec_);
    }
  }

  // Weight gradients over all rows.
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, g4, in_dim_, n, 1.0f,
              dgates, g4, in, in_dim_, 0.0f, dw_x, in_dim_);
  std::fill(dbias, dbias + g4, 0.0f);
  for (int i = 0; i < n; ++i) {
    const float* row = dgates + int64_t{i} * g4;
    for (int k = 0; k < g4; ++k) dbias[k] += row[k];
  }
  // dW_r = Σ_t dG_t^T r_prev(t): the forward direction pairs rows
  // [S, n) of dG with rows [0, n - S) of r, the backward one the reverse.
  const int paired = n - sequences;
  if (paired > 0) {
    const int64_t shift = int64_t{sequences};
    const float* dg0 = dir == 0 ? dgates + shift * g4 : dgates;
    const float* r0 = out + int64_t{dir} * rec_ + (dir == 0 ? 0 : shift * out_dim_);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, g4, rec_, paired,
                1.0f, dg0, g4, r0, out_dim_, 0.0f, dw_r, rec_);
  } else {
    std::fill(dw_r, dw_r + int64_t{g4} * rec_, 0.0f);
  }
  if (projection_ > 0) {
    // dW_p = dR^T H.
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, projection_, cells_, n,
                1.0f, drec, rec_, cache.hidden.data(), cells_, 0.0f, dw_p,
                cells_);
  }
  if (din != nullptr) {
    // dX (+)= dG W_x; the second direction adds to the first's.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in_dim_, g4, 1.0f,
                dgates, g4, w_x, in_dim_, dir == 0 ? 0.0f : 1.0f, din, in_dim_);
  }
}

}  // namespace asgd
