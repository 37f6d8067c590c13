#include "model/layers/conv.h"

#include <cblas.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include <algorithm>

#include "model/layers/activation.h"

namespace asgd {
namespace {

// Upper bound on the floats of one block's patch or pre-pooling matrix
// (4 MiB each): GEMMs of thousands of rows, and scratch that does not grow
// with max_rows. (Smaller blocks made the layer no faster on a 1 MiB-L2
// core, larger ones only cost memory.)
constexpr int64_t kBlockFloats = int64_t{1} << 20;

int BlockRows(int positions, int patch, int filters, int max_rows,
              int requested) {
  if (requested > 0) return std::min(requested, max_rows);
  const int64_t per_row = int64_t{positions} * std::max(patch, filters);
  return static_cast<int>(
      std::clamp<int64_t>(kBlockFloats / per_row, 1, max_rows));
}

FeatureShape ConvOutput(const FeatureShape& in, const ConvLayerSpec& s) {
  return {s.filters, (in.time - s.kernel_time + 1) / s.pool_time,
          (in.freq - s.kernel_freq + 1) / s.pool_freq};
}

// The pooling loops are compiled for AVX2/FMA (x86-64-v3) as well as the
// baseline; the loader picks the best one for the CPU.
#define ASGD_CONV_CLONES \
  __attribute__((target_clones("arch=x86-64-v3", "default")))

// Max-pooling of one row's pre-activations z [positions, filters] (positions
// conv_time × conv_freq): the maximum of each window and filter into
// best [T', F', filters], and the position it came from into arg (same
// shape). Ties keep the first position in window order.
ASGD_CONV_CLONES void PoolRow(const float* __restrict z, int filters,
                              int out_time, int out_freq, int pool_time,
                              int pool_freq, int conv_freq,
                              float* __restrict best, int32_t* __restrict arg) {
  for (int tp = 0; tp < out_time; ++tp) {
    for (int fp = 0; fp < out_freq; ++fp) {
      const int32_t p0 = tp * pool_time * conv_freq + fp * pool_freq;
      const float* z0 = z + int64_t{p0} * filters;
      for (int k = 0; k < filters; ++k) {
        best[k] = z0[k];
        arg[k] = p0;
      }
      for (int i = 0; i < pool_time; ++i) {
        for (int j = i == 0 ? 1 : 0; j < pool_freq; ++j) {
          const int32_t p = p0 + i * conv_freq + j;
          const float* zp = z + int64_t{p} * filters;
          for (int k = 0; k < filters; ++k) {
            const bool more = zp[k] > best[k];
            best[k] = more ? zp[k] : best[k];
            arg[k] = more ? p : arg[k];
          }
        }
      }
      best += filters;
      arg += filters;
    }
  }
}

// Spreads one row's pooled gradient dq [T', F', filters] over its
// pre-pooling positions dz [positions, filters]: each window position gets
// the gradient of the filters whose maximum it was, 0 for the others.
// Positions outside every window are left alone (the caller zeroes them).
ASGD_CONV_CLONES void UnpoolRow(const float* __restrict dq,
                                const int32_t* __restrict arg, int filters,
                                int out_time, int out_freq, int pool_time,
                                int pool_freq, int conv_freq,
                                float* __restrict dz) {
  for (int tp = 0; tp < out_time; ++tp) {
    for (int fp = 0; fp < out_freq; ++fp) {
      const int32_t p0 = tp * pool_time * conv_freq + fp * pool_freq;
      for (int i = 0; i < pool_time; ++i) {
        for (int j = 0; j < pool_freq; ++j) {
          const int32_t p = p0 + i * conv_freq + j;
          float* d = dz + int64_t{p} * filters;
          for (int k = 0; k < filters; ++k) {
            d[k] = arg[k] == p ? dq[k] : 0.0f;
          }
        }
      }
      dq += filters;
      arg += filters;
    }
  }
}

// dst [cols, rows] = src [rows, cols]^T: 4 × 4 blocks through SSE registers
// (x86-64's baseline), the edges one by one.
void Transpose(const float* __restrict src, int rows, int cols,
               float* __restrict dst) {
  int r = 0;
#if defined(__SSE__)
  for (; r + 4 <= rows; r += 4) {
    const float* s0 = src + int64_t{r} * cols;
    int c = 0;
    for (; c + 4 <= cols; c += 4) {
      __m128 a = _mm_loadu_ps(s0 + c);
      __m128 b = _mm_loadu_ps(s0 + cols + c);
      __m128 e = _mm_loadu_ps(s0 + 2 * cols + c);
      __m128 d = _mm_loadu_ps(s0 + 3 * cols + c);
      _MM_TRANSPOSE4_PS(a, b, e, d);
      float* d0 = dst + int64_t{c} * rows + r;
      _mm_storeu_ps(d0, a);
      _mm_storeu_ps(d0 + rows, b);
      _mm_storeu_ps(d0 + 2 * rows, e);
      _mm_storeu_ps(d0 + 3 * rows, d);
    }
    for (; c < cols; ++c) {
      for (int i = 0; i < 4; ++i) {
        dst[int64_t{c} * rows + r + i] = s0[int64_t{i} * cols + c];
      }
    }
  }
#endif
  for (; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      dst[int64_t{c} * rows + r] = src[int64_t{r} * cols + c];
    }
  }
}

}  // namespace

ConvLayer::ConvLayer(const FeatureShape& in, const ConvLayerSpec& spec,
                     int max_rows, int block_rows)
    : in_(in),
      spec_(spec),
      out_(ConvOutput(in, spec)),
      conv_time_(in.time - spec.kernel_time + 1),
      conv_freq_(in.freq - spec.kernel_freq + 1),
      positions_(conv_time_ * conv_freq_),
      patch_(in.channels * spec.kernel_time * spec.kernel_freq),
      block_rows_(BlockRows(positions_, patch_, spec.filters, max_rows,
                            block_rows)),
      cols_(int64_t{block_rows_} * positions_ * patch_),
      z_(int64_t{block_rows_} * positions_ * spec.filters),
      pooled_(int64_t{out_.time} * out_.freq * spec.filters),
      argmax_(int64_t{max_rows} * out_.dim()),
      dpool_(out_.dim()) {}

void ConvLayer::Im2Col(const float* in, int first, int count) {
  const int kt = spec_.kernel_time, kf = spec_.kernel_freq;
  const int64_t in_dim = in_.dim();
  const int64_t plane = int64_t{in_.time} * in_.freq;
  float* dst = cols_.data();
  for (int r = 0; r < count; ++r) {
    const float* row = in + (first + r) * in_dim;
    for (int t = 0; t < conv_time_; ++t) {
      for (int f = 0; f < conv_freq_; ++f) {
        for (int c = 0; c < in_.channels; ++c) {
          const float* src = row + c * plane + int64_t{t} * in_.freq + f;
          for (int dt = 0; dt < kt; ++dt) {
            const float* s = src + int64_t{dt} * in_.freq;
            for (int df = 0; df < kf; ++df) dst[df] = s[df];
            dst += kf;
          }
        }
      }
    }
  }
}

void ConvLayer::Col2ImAdd(int first, int count, float* din) const {
  const int kt = spec_.kernel_time, kf = spec_.kernel_freq;
  const int64_t in_dim = in_.dim();
  const int64_t plane = int64_t{in_.time} * in_.freq;
  const float* src = cols_.data();
  for (int r = 0; r < count; ++r) {
    float* row = din + (first + r) * in_dim;
    for (int t = 0; t < conv_time_; ++t) {
      for (int f = 0; f < conv_freq_; ++f) {
        for (int c = 0; c < in_.channels; ++c) {
          float* dst = row + c * plane + int64_t{t} * in_.freq + f;
          for (int dt = 0; dt < kt; ++dt) {
            float* d = dst + int64_t{dt} * in_.freq;
            for (int df = 0; df < kf; ++df) d[df] += src[df];
            src += kf;
          }
        }
      }
    }
  }
}

void ConvLayer::Forward(const float* params, const float* in, int sequences,
                        int steps, float* out) {
  const int n = sequences * steps;
  const int filters = spec_.filters;
  const int pt = spec_.pool_time, pf = spec_.pool_freq;
  const int pooled = out_.time * out_.freq;  // per filter
  const int64_t out_dim = out_.dim();
  const float* w = params;
  const float* bias = params + int64_t{filters} * patch_;
  for (int first = 0; first < n; first += block_rows_) {
    const int count = std::min(block_rows_, n - first);
    Im2Col(in, first, count);
    // Z [positions, filters] per row = patches · W^T.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, count * positions_,
                filters, patch_, 1.0f, cols_.data(), patch_, w, patch_, 0.0f,
                z_.data(), filters);
    for (int r = 0; r < count; ++r) {
      PoolRow(z_.data() + int64_t{r} * positions_ * filters, filters,
              out_.time, out_.freq, pt, pf, conv_freq_, pooled_.data(),
              argmax_.data() + (first + r) * out_dim);
      // [T'F', filters] -> channel-major output, plus the bias.
      // [T'F', filters] -> channel-major output, plus the bias, activated
      // while the row is in cache.
      float* o = out + (first + r) * out_dim;
      Transpose(pooled_.data(), pooled, filters, o);
      for (int k = 0; k < filters; ++k) {
        float* ok = o + int64_t{k} * pooled;
        for (int q = 0; q < pooled; ++q) ok[q] += bias[k];
      }
      ActivateInPlace(spec_.activation, o, out_dim);
    }
  }
}

void ConvLayer::Backward(const float* params, const float* in,
                         const float* out, const float* dout, int sequences,
                         int steps, float* dparams, float* din) {
  const int n = sequences * steps;
  const int filters = spec_.filters;
  const int pooled = out_.time * out_.freq;
  const int64_t out_dim = out_.dim();
  const float* w = params;
  float* dw = dparams;
  float* db = dparams + int64_t{filters} * patch_;

  std::fill(db, db + filters, 0.0f);

  // Positions that no pooling window covers (leftovers at the high end).
  const int covered_time = out_.time * spec_.pool_time;
  const int covered_freq = out_.freq * spec_.pool_freq;
  for (int first = 0; first < n; first += block_rows_) {
    const int count = std::min(block_rows_, n - first);
    const int64_t m = int64_t{count} * positions_;
    Im2Col(in, first, count);
    // dZ [positions, filters] per row: the pooled gradient at each window's
    // chosen position, zero elsewhere.
    float* dz = z_.data();
    for (int r = 0; r < count; ++r) {
      // The row's gradient at the pooled pre-activations, dout · act'(out),
      // as [T'F', filters]; its sums give db.
      const int64_t row = first + r;
      float* dpool = dpool_.data();
      std::copy(dout + row * out_dim, dout + (row + 1) * out_dim, dpool);
      ActivationBackwardInPlace(spec_.activation, out + row * out_dim, dpool,
                                out_dim);
      float* dq = pooled_.data();
      Transpose(dpool, filters, pooled, dq);
      for (int q = 0; q < pooled; ++q) {
        const float* d = dq + int64_t{q} * filters;
        for (int k = 0; k < filters; ++k) db[k] += d[k];
      }
      float* dzr = dz + int64_t{r} * positions_ * filters;
      UnpoolRow(dq, argmax_.data() + (first + r) * out_dim, filters,
                out_.time, out_.freq, spec_.pool_time, spec_.pool_freq,
                conv_freq_, dzr);
      for (int t = 0; t < conv_time_; ++t) {
        const int f0 = t < covered_time ? covered_freq : 0;
        float* z = dzr + (int64_t{t} * conv_freq_ + f0) * filters;
        std::fill(z, z + int64_t{conv_freq_ - f0} * filters, 0.0f);
      }
    }
    // dW += dZ^T · patches.
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, filters, patch_, m,
                1.0f, dz, filters, cols_.data(), patch_,
                first == 0 ? 0.0f : 1.0f, dw, patch_);
    if (din != nullptr) {
      // dPatches = dZ · W, folded back onto the input positions.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, patch_,
                  filters, 1.0f, dz, filters, w, patch_, 0.0f, cols_.data(),
                  patch_);
      float* block = din + first * in_.dim();
      std::fill(block, block + int64_t{count} * in_.dim(), 0.0f);
      Col2ImAdd(first, count, din);
    }
  }
}

}  // namespace asgd
