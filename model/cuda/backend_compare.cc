#include "model/cuda/backend_compare.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace asgd {
namespace {

using Vec = std::vector<double>;

double Act(Activation act, double v) {
  switch (act) {
    case Activation::kRelu:
      return v > 0 ? v : 0;
    case Activation::kSigmoid:
      return 1 / (1 + std::exp(-v));
    case Activation::kTanh:
      return std::tanh(v);
    case Activation::kNone:
      break;
  }
  return v;
}

double Sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

int64_t TensorElements(const TensorSpec& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  return n;
}

// y = W x + b for W [rows, x.size()] row-major at w, b at b.
Vec Affine(const float* w, const float* b, int rows, const Vec& x) {
  Vec y(rows);
  const int cols = static_cast<int>(x.size());
  for (int o = 0; o < rows; ++o) {
    double s = b != nullptr ? b[o] : 0.0;
    const float* wr = w + int64_t{o} * cols;
    for (int k = 0; k < cols; ++k) s += double{wr[k]} * x[k];
    y[o] = s;
  }
  return y;
}

struct Margin {
  double min = std::numeric_limits<double>::infinity();
  int64_t clipped = 0;
  void See(double distance) { min = std::min(min, std::abs(distance)); }
};

// A dense layer on one row.
Vec DenseRow(const float* p, int units, Activation act, const Vec& x,
             Margin& margin) {
  Vec z = Affine(p, p + int64_t{units} * x.size(), units, x);
  for (double& v : z) {
    if (act == Activation::kRelu) margin.See(v);
    v = Act(act, v);
  }
  return z;
}

// A conv layer on one row of shape `in` (channel-major): convolution, then
// for each pooling window its maximum, plus the bias, then the activation.
Vec ConvRow(const float* p, const FeatureShape& in, const ConvLayerSpec& c,
            const Vec& x, Margin& margin) {
  const int conv_t = in.time - c.kernel_time + 1;
  const int conv_f = in.freq - c.kernel_freq + 1;
  const int out_t = conv_t / c.pool_time, out_f = conv_f / c.pool_freq;
  const float* bias =
      p + int64_t{c.filters} * in.channels * c.kernel_time * c.kernel_freq;
  Vec out(int64_t{c.filters} * out_t * out_f);
  for (int k = 0; k < c.filters; ++k) {
    // z[t][f] before pooling, without the bias.
    Vec z(int64_t{conv_t} * conv_f);
    for (int t = 0; t < conv_t; ++t) {
      for (int f = 0; f < conv_f; ++f) {
        double s = 0;
        for (int ch = 0; ch < in.channels; ++ch) {
          for (int dt = 0; dt < c.kernel_time; ++dt) {
            for (int df = 0; df < c.kernel_freq; ++df) {
              const float w =
                  p[((int64_t{k} * in.channels + ch) * c.kernel_time + dt) *
                        c.kernel_freq +
                    df];
              s += w * x[(int64_t{ch} * in.time + t + dt) * in.freq + f + df];
            }
          }
        }
        z[int64_t{t} * conv_f + f] = s;
      }
    }
    for (int tp = 0; tp < out_t; ++tp) {
      for (int fp = 0; fp < out_f; ++fp) {
        double best = -std::numeric_limits<double>::infinity();
        double second = best;
        for (int i = 0; i < c.pool_time; ++i) {
          for (int j = 0; j < c.pool_freq; ++j) {
            const double v = z[int64_t{tp * c.pool_time + i} * conv_f +
                               fp * c.pool_freq + j];
            if (v > best) {
              second = best;
              best = v;
            } else if (v > second) {
              second = v;
            }
          }
        }
        if (c.pool_time * c.pool_freq > 1) margin.See(best - second);
        const double v = best + bias[k];
        if (c.activation == Activation::kRelu) margin.See(v);
        out[(int64_t{k} * out_t + tp) * out_f + fp] = Act(c.activation, v);
      }
    }
  }
  return out;
}

// An LSTM layer over one sequence xs (one vector per step).
std::vector<Vec> LstmSequence(const float* p, int in_dim,
                              const LstmLayerSpec& s,
                              const std::vector<Vec>& xs, Margin& margin) {
  const int n = s.cells;
  const int rec = s.projection > 0 ? s.projection : n;
  const int dirs = s.bidirectional ? 2 : 1;
  const int steps = static_cast<int>(xs.size());
  const int64_t dir_params =
      int64_t{4} * n * (in_dim + rec + 1) + int64_t{s.projection} * n;
  std::vector<Vec> out(steps, Vec(int64_t{dirs} * rec));
  for (int d = 0; d < dirs; ++d) {
    const float* w_x = p + d * dir_params;
    const float* w_r = w_x + int64_t{4} * n * in_dim;
    const float* b = w_r + int64_t{4} * n * rec;
    const float* w_p = b + 4 * n;
    Vec r(rec, 0.0), c(n, 0.0);
    for (int step = 0; step < steps; ++step) {
      const int t = d == 0 ? step : steps - 1 - step;
      const Vec gx = Affine(w_x, b, 4 * n, xs[t]);
      const Vec gr = Affine(w_r, nullptr, 4 * n, r);
      Vec h(n);
      for (int j = 0; j < n; ++j) {
        const double i = Sigmoid(gx[j] + gr[j]);
        const double f = Sigmoid(gx[n + j] + gr[n + j]);
        const double g = std::tanh(gx[2 * n + j] + gr[2 * n + j]);
        const double o = Sigmoid(gx[3 * n + j] + gr[3 * n + j]);
        double v = f * c[j] + i * g;
        if (s.cell_clip > 0) {
          margin.See(std::abs(v) - s.cell_clip);
          if (std::abs(v) > s.cell_clip) {
            ++margin.clipped;
            v = v > 0 ? s.cell_clip : -s.cell_clip;
          }
        }
        c[j] = v;
        h[j] = o * std::tanh(v);
      }
      r = s.projection > 0 ? Affine(w_p, nullptr, s.projection, h) : h;
      std::copy(r.begin(), r.end(), out[t].begin() + int64_t{d} * rec);
    }
  }
  return out;
}

}  // namespace

ReferenceForward RunReference(const ModelSpec& spec,
                              absl::Span<const float> params,
                              absl::Span<const float> inputs, int steps) {
  const int d = spec.input_dim();
  std::vector<Vec> xs(steps);
  for (int t = 0; t < steps; ++t) {
    xs[t].assign(inputs.begin() + int64_t{t} * d,
                 inputs.begin() + int64_t{t + 1} * d);
  }
  Margin margin;
  const int num = static_cast<int>(spec.layers.size());
  for (int l = 0; l <= num; ++l) {
    const float* p = params.data() + LayerParamOffset(spec, l);
    const FeatureShape in = LayerInputShape(spec, l);
    if (l == num) {
      for (Vec& x : xs)
        x = Affine(p, p + int64_t{spec.num_classes} * in.dim(),
                   spec.num_classes, x);
      break;
    }
    const LayerSpec& layer = spec.layers[l];
    switch (layer.kind) {
      case LayerKind::kDense:
        for (Vec& x : xs) {
          x = DenseRow(p, layer.dense.units, layer.dense.activation, x, margin);
        }
        break;
      case LayerKind::kConv:
        for (Vec& x : xs) x = ConvRow(p, in, layer.conv, x, margin);
        break;
      case LayerKind::kLstm:
        xs = LstmSequence(p, in.dim(), layer.lstm, xs, margin);
        break;
    }
  }
  ReferenceForward result;
  for (const Vec& x : xs) {
    result.logits.insert(result.logits.end(), x.begin(), x.end());
  }
  result.kink_margin = margin.min;
  result.clipped = margin.clipped;
  return result;
}

absl::StatusOr<CompareBatch> MakeCompareBatch(
    const ModelSpec& spec, absl::Span<const float> params, int sequences,
    int steps, double kink_clear, double unlabelled, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int32_t> label(0, spec.num_classes - 1);
  std::bernoulli_distribution skip(unlabelled);
  const int d = spec.input_dim(), c = spec.num_classes;
  CompareBatch batch;
  batch.sequences = sequences;
  batch.steps = steps;
  batch.inputs.resize(int64_t{sequences} * steps * d);
  batch.labels.resize(int64_t{sequences} * steps);
  batch.ref_argmax.resize(batch.labels.size());
  batch.logit_margin.resize(batch.labels.size());
  batch.ref_logits.resize(batch.labels.size() * c);
  batch.kink_margin = std::numeric_limits<double>::infinity();
  std::vector<float> seq(int64_t{steps} * d);
  for (int b = 0; b < sequences; ++b) {
    ReferenceForward ref;
    for (int attempt = 0;; ++attempt) {
      for (float& v : seq) v = normal(rng);
      ref = RunReference(spec, params, seq, steps);
      if (ref.kink_margin >= kink_clear) break;
      if (attempt == 20000) {
        return absl::FailedPreconditionError(absl::StrCat(
            "no input for sequence ", b, " keeps every threshold decision ",
            kink_clear, " clear (last margin ", ref.kink_margin, ")"));
      }
    }
    batch.kink_margin = std::min(batch.kink_margin, ref.kink_margin);
    batch.clipped += ref.clipped;
    for (int t = 0; t < steps; ++t) {
      const int64_t row = int64_t{t} * sequences + b;  // time-major
      std::copy(seq.begin() + int64_t{t} * d, seq.begin() + int64_t{t + 1} * d,
                batch.inputs.begin() + row * d);
      const double* z = ref.logits.data() + int64_t{t} * c;
      std::copy(z, z + c, batch.ref_logits.begin() + row * c);
      const int top = static_cast<int>(std::max_element(z, z + c) - z);
      double second = -std::numeric_limits<double>::infinity();
      for (int k = 0; k < c; ++k) {
        if (k != top) second = std::max(second, z[k]);
      }
      batch.ref_argmax[row] = top;
      batch.logit_margin[row] = z[top] - second;
      const int32_t drawn = label(rng);
      batch.labels[row] = skip(rng) ? kNoLabel : drawn;
    }
  }
  return batch;
}

std::vector<float> CompareParams(const ModelSpec& spec, uint32_t seed) {
  std::vector<float> params = InitialParams(spec, seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  for (float& p : params) p += 0.01f * normal(rng);
  int64_t offset = 0;
  for (const TensorSpec& t : ModelTensors(spec)) {
    const int64_t n = TensorElements(t);
    if (t.shape.size() == 1) {
      for (int64_t i = 0; i < n; ++i) params[offset + i] += 0.1f * normal(rng);
    }
    offset += n;
  }
  return params;
}

CompareTolerance ToleranceFor(CudaOptions::MathMode math) {
  if (math == CudaOptions::MathMode::kFp32) return {1e-4, 1e-4, 1e-4, 1e-4};
  return {2e-2, 1e-2, 2e-2, 2e-2};
}

CompareReport ExpectBackendsAgree(ModelBackend& want, ModelBackend& got,
                                  absl::Span<const float> params,
                                  const CompareBatch& batch,
                                  const CompareTolerance& tol,
                                  const std::string& context) {
  SCOPED_TRACE(context);
  CompareReport report;
  const ModelSpec& spec = want.spec();
  const int rows = batch.rows(), c = spec.num_classes;
  std::vector<float> want_grad(params.size());
  std::vector<float> got_grad(params.size(),
                              std::numeric_limits<float>::quiet_NaN());
  auto w =
      want.ComputeGradient(params, batch.batch(), absl::MakeSpan(want_grad));
  auto g = got.ComputeGradient(params, batch.batch(), absl::MakeSpan(got_grad));
  EXPECT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(g.ok()) << g.status();
  if (!w.ok() || !g.ok()) return report;

  // Labelled count, loss, correct count.
  int labelled = 0, sure_hits = 0, unsure = 0;
  for (int i = 0; i < rows; ++i) {
    if (batch.labels[i] == kNoLabel) continue;
    ++labelled;
    if (batch.logit_margin[i] < tol.margin) {
      ++unsure;
    } else {
      sure_hits += batch.ref_argmax[i] == batch.labels[i];
    }
  }
  EXPECT_EQ(w->labelled, labelled);
  EXPECT_EQ(g->labelled, labelled);
  EXPECT_NEAR(g->loss, w->loss, tol.loss * (1 + std::abs(w->loss)));
  report.loss = std::abs(g->loss - w->loss) / (1 + std::abs(w->loss));
  for (const auto* r : {&*w, &*g}) {
    EXPECT_GE(r->correct, sure_hits) << (r == &*w ? "want" : "got");
    EXPECT_LE(r->correct, sure_hits + unsure) << (r == &*w ? "want" : "got");
  }

  // Every gradient tensor.
  int64_t offset = 0;
  for (const TensorSpec& t : ModelTensors(spec)) {
    const int64_t n = TensorElements(t);
    double max_want = 0, max_err = 0;
    int64_t worst = offset;
    for (int64_t j = offset; j < offset + n; ++j) {
      max_want = std::max(max_want, std::abs(double{want_grad[j]}));
      const double err = std::abs(double{got_grad[j]} - want_grad[j]);
      if (std::isnan(err) || err > max_err) {  // NaN sticks and fails
        max_err = err;
        worst = j;
        if (std::isnan(err)) break;
      }
    }
    EXPECT_LE(max_err, tol.grad * std::max(max_want, 1e-30))
        << t.name << ": largest error at flat index " << worst << ": want "
        << want_grad[worst] << ", got " << got_grad[worst]
        << " (tensor max |want| " << max_want << ")";
    const double ratio =
        max_want > 0 ? max_err / max_want : (max_err > 0 ? INFINITY : 0.0);
    report.grad = std::max(report.grad, std::isnan(ratio) ? INFINITY : ratio);
    offset += n;
  }

  // Log-posteriors.
  std::vector<float> want_logp(int64_t{rows} * c), got_logp(want_logp.size());
  const absl::Status wl =
      want.LogPosteriors(params, batch.batch(), absl::MakeSpan(want_logp));
  const absl::Status gl =
      got.LogPosteriors(params, batch.batch(), absl::MakeSpan(got_logp));
  EXPECT_TRUE(wl.ok()) << wl;
  EXPECT_TRUE(gl.ok()) << gl;
  if (wl.ok() && gl.ok()) {
    double worst = 0;
    int64_t worst_at = 0;
    for (int64_t j = 0; j < int64_t{rows} * c; ++j) {
      const double e = std::abs(double{got_logp[j]} - want_logp[j]) /
                       (1 + std::abs(double{want_logp[j]}));
      if (std::isnan(e) || e > worst) {
        worst = e;
        worst_at = j;
        if (std::isnan(e)) break;
      }
    }
    EXPECT_LE(worst, tol.logp)
        << "log-posterior of row " << worst_at / c << ", class " << worst_at % c
        << ": want " << want_logp[worst_at] << ", got " << got_logp[worst_at];
    report.logp = std::isnan(worst) ? INFINITY : worst;
  }

  // Predictions of the rows whose two best logits are clear apart.
  std::vector<int32_t> want_pred(rows, -1), got_pred(rows, -1);
  const absl::Status wp =
      want.Predict(params, batch.batch(), absl::MakeSpan(want_pred));
  const absl::Status gp =
      got.Predict(params, batch.batch(), absl::MakeSpan(got_pred));
  EXPECT_TRUE(wp.ok()) << wp;
  EXPECT_TRUE(gp.ok()) << gp;
  if (wp.ok() && gp.ok()) {
    for (int i = 0; i < rows; ++i) {
      if (batch.logit_margin[i] >= tol.margin) {
        EXPECT_EQ(got_pred[i], want_pred[i]) << "prediction of row " << i;
        EXPECT_EQ(want_pred[i], batch.ref_argmax[i]) << "row " << i;
      } else {
        EXPECT_GE(got_pred[i], 0) << "row " << i;
        EXPECT_LT(got_pred[i], c) << "row " << i;
      }
    }
  }
  return report;
}

// ConvLayerSpec{filters, kernel_time, kernel_freq, pool_time, pool_freq,
// activation}; LstmLayerSpec{cells, projection, cell_clip, bidirectional}.

ModelSpec CompareCnn(Activation act) {
  ModelSpec spec;
  spec.feature_dim = 17;
  spec.context = 4;  // 9 frames
  spec.layers = {LayerSpec::Conv(ConvLayerSpec{4, 3, 4, 1, 2, act}),
                 LayerSpec::Conv(ConvLayerSpec{3, 3, 3, 2, 2, act}),
                 LayerSpec::Dense(7, act)};
  spec.num_classes = 5;
  return spec;
}

ModelSpec CompareLstm() {
  ModelSpec spec;
  spec.feature_dim = 11;
  spec.context = 0;
  spec.layers = {LayerSpec::Lstm(LstmLayerSpec{8, 5, 0.5f, false}),
                 LayerSpec::Lstm(LstmLayerSpec{7, 0, 0.0f, false}),
                 LayerSpec::Dense(9, Activation::kTanh)};
  spec.num_classes = 6;
  return spec;
}

ModelSpec CompareBlstm() {
  ModelSpec spec;
  spec.feature_dim = 9;
  spec.context = 0;
  spec.layers = {LayerSpec::Lstm(LstmLayerSpec{6, 4, 0.5f, true}),
                 LayerSpec::Lstm(LstmLayerSpec{5, 0, 0.0f, true})};
  spec.num_classes = 5;
  return spec;
}

}  // namespace asgd
