#include "model/layers/conv.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>

#include "model/layers/activation.h"

namespace asgd {
namespace {

// Upper bound on the floats of one block's patch or pre-pooling matrix: big
// enough for GEMMs of several hundred rows, small enough to stay in cache.
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
      dpool_(int64_t{max_rows} * out_.dim()) {}

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
            std::memcpy(dst, src + int64_t{dt} * in_.freq, kf * sizeof(float));
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
      const float* z = z_.data() + int64_t{r} * positions_ * filters;
      int32_t* arg = argmax_.data() + (first + r) * out_dim;
      float* best = pooled_.data();
      for (int tp = 0; tp < out_.time; ++tp) {
        for (int fp = 0; fp < out_.freq; ++fp) {
          const int32_t p0 = tp * pt * conv_freq_ + fp * pf;
          const float* z0 = z + int64_t{p0} * filters;
          for (int k = 0; k < filters; ++k) {
            best[k] = z0[k];
            arg[k] = p0;
          }
          for (int i = 0; i < pt; ++i) {
            for (int j = i == 0 ? 1 : 0; j < pf; ++j) {
              const int32_t p = p0 + i * conv_freq_ + j;
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
      // [T'F', filters] -> channel-major output, plus the bias.
      float* o = out + (first + r) * out_dim;
      for (int q = 0; q < pooled; ++q) {
        const float* src = pooled_.data() + int64_t{q} * filters;
        for (int k = 0; k < filters; ++k) {
          o[int64_t{k} * pooled + q] = src[k] + bias[k];
        }
      }
    }
  }
  ActivateInPlace(spec_.activation, out, n * out_dim);
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

  // dL/d(pooled pre-activation) = dout · act'(out).
  float* dpool = dpool_.data();
  std::copy(dout, dout + n * out_dim, dpool);
  ActivationBackwardInPlace(spec_.activation, out, dpool, n * out_dim);
  std::fill(db, db + filters, 0.0f);
  for (int r = 0; r < n; ++r) {
    const float* d = dpool + r * out_dim;
    for (int k = 0; k < filters; ++k) {
      float sum = 0.0f;
      for (int q = 0; q < pooled; ++q) sum += d[int64_t{k} * pooled + q];
      db[k] += sum;
    }
  }

  for (int first = 0; first < n; first += block_rows_) {
    const int count = std::min(block_rows_, n - first);
    const int64_t m = int64_t{count} * positions_;
    Im2Col(in, first, count);
    // dZ [positions, filters] per row: the pooled gradient at each window's
    // chosen position, zero elsewhere.
    float* dz = z_.data();
    std::fill(dz, dz + m * filters, 0.0f);
    for (int r = 0; r < count; ++r) {
      const int32_t* arg = argmax_.data() + (first + r) * out_dim;
      const float* d = dpool + (first + r) * out_dim;
      float* dzr = dz + int64_t{r} * positions_ * filters;
      for (int q = 0; q < pooled; ++q) {
        for (int k = 0; k < filters; ++k) {
          dzr[int64_t{arg[k]} * filters + k] = d[int64_t{k} * pooled + q];
        }
        arg += filters;
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
