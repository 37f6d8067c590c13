#include "model/layers/gradient_check.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_format.h"
#include "model/layers/layer.h"

namespace asgd {
namespace {

// Up to `max` distinct indices of [0, n), spread evenly with a random start.
std::vector<int64_t> Sample(int64_t n, int max, std::mt19937_64& rng) {
  std::vector<int64_t> out;
  if (n <= max) {
    for (int64_t i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  const double stride = static_cast<double>(n) / max;
  const double start = std::uniform_real_distribution<double>(0, stride)(rng);
  for (int k = 0; k < max; ++k) {
    out.push_back(std::min<int64_t>(n - 1, static_cast<int64_t>(start + k * stride)));
  }
  return out;
}

}  // namespace

GradientCheckReport CheckLayerGradients(const ModelSpec& spec, int layer,
                                        int sequences, int steps,
                                        const GradientCheckOptions& options) {
  GradientCheckReport report;
  const int rows = sequences * steps;
  auto created = CreateLayer(spec, layer, rows);
  if (!created.ok()) {
    report.failures = 1;
    report.first_failure = std::string(created.status().message());
    return report;
  }
  Layer& l = **created;
  std::mt19937_64 rng(options.seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);

  const std::vector<float> all = InitialParams(spec, options.seed);
  const int64_t offset = LayerParamOffset(spec, layer);
  std::vector<float> params(all.begin() + offset,
                            all.begin() + offset + LayerParamCount(spec, layer));
  for (float& p : params) p += options.param_noise * unit(rng);
  const int64_t in_size = int64_t{rows} * l.in_shape().dim();
  const int64_t out_size = int64_t{rows} * l.out_shape().dim();
  std::vector<float> in(in_size), out(out_size), r(out_size);
  for (float& x : in) x = options.input_scale * unit(rng);
  for (float& x : r) x = unit(rng);

  auto score = [&]() {
    l.Forward(params.data(), in.data(), sequences, steps, out.data());
    double s = 0;
    for (int64_t j = 0; j < out_size; ++j) s += double{out[j]} * r[j];
    return s;
  };

  score();
  std::vector<float> dparams(params.size()), din(in_size);
  l.Backward(params.data(), in.data(), out.data(), r.data(), sequences, steps,
             dparams.data(), din.data());

  auto check = [&](const char* what, std::vector<float>& values,
                   const std::vector<float>& analytic, int64_t j) {
    const float saved = values[j];
    values[j] = saved + options.step;
    const double plus = score();
    values[j] = saved - options.step;
    const double minus = score();
    values[j] = saved;
    const double numeric = (plus - minus) / (2 * options.step);
    const double a = analytic[j];
    const double err = std::abs(a - numeric);
    report.max_abs_error = std::max(report.max_abs_error, err);
    ++report.checked;
    if (err > options.atol + options.rtol * std::max(std::abs(a), std::abs(numeric))) {
      if (report.failures++ == 0) {
        report.first_failure = absl::StrFormat(
            "%s %d: analytic %.6g, numeric %.6g", what, j, a, numeric);
      }
    }
  };
  for (int64_t j : Sample(params.size(), options.max_params, rng)) {
    check("param", params, dparams, j);
  }
  for (int64_t j : Sample(in_size, options.max_inputs, rng)) {
    check("input", in, din, j);
  }
  return report;
}

}  // namespace asgd
