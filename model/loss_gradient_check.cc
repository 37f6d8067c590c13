#include "model/loss_gradient_check.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace asgd {

LossGradientReport CheckLossGradient(ModelBackend& backend,
                                     std::vector<float> params,
                                     const Batch& batch,
                                     absl::Span<const float> grad,
                                     const LossGradientOptions& options) {
  LossGradientReport report;
  std::vector<float> scratch(params.size());
  // NaN when the call fails: the comparison below then fails.
  auto loss = [&]() -> double {
    auto r = backend.ComputeGradient(params, batch, absl::MakeSpan(scratch));
    return r.ok() ? r->loss : NAN;
  };
  const size_t stride = std::max<size_t>(1, options.stride);
  for (size_t j = options.first; j < params.size(); j += stride) {
    const float saved = params[j];
    params[j] = static_cast<float>(saved + options.step);
    const double plus = loss();
    params[j] = static_cast<float>(saved - options.step);
    const double minus = loss();
    params[j] = saved;
    const double numeric = (plus - minus) / (2 * options.step);
    const double analytic = grad[j];
    ++report.checked;
    if (!(std::abs(numeric - analytic) <=
          options.atol +
              options.rtol * std::max(std::abs(numeric), std::abs(analytic)))) {
      if (report.failures++ == 0) {
        report.first_failure = absl::StrCat("param ", j, ": analytic ",
                                            analytic, ", numeric ", numeric);
      }
    }
  }
  return report;
}

}  // namespace asgd
