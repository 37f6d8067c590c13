#include "worker/consensus/consensus_rules.h"

#include <cstddef>

namespace asgd {

void SgdStep(absl::Span<const float> g, float lr, absl::Span<float> x) {
  for (size_t i = 0; i < x.size(); ++i) x[i] -= lr * g[i];
}

void ElasticDifference(absl::Span<const float> x, absl::Span<const float> z,
                       float alpha, absl::Span<float> e) {
  for (size_t i = 0; i < x.size(); ++i) e[i] = alpha * (x[i] - z[i]);
}

void ElasticStep(absl::Span<const float> e, absl::Span<float> x) {
  for (size_t i = 0; i < x.size(); ++i) x[i] -= e[i];
}

void AugmentAdmmGradient(absl::Span<const float> x, absl::Span<const float> z,
                         absl::Span<const float> lam, float rho,
                         absl::Span<float> g) {
  for (size_t i = 0; i < g.size(); ++i) {
    g[i] += lam[i] + rho * (x[i] - z[i]);
  }
}

void AdmmPoint(absl::Span<const float> x, absl::Span<const float> lam,
               float rho, absl::Span<float> u) {
  for (size_t i = 0; i < x.size(); ++i) u[i] = x[i] + lam[i] / rho;
}

void AdmmDualOfPoint(absl::Span<const float> u, absl::Span<const float> x,
                     float rho, absl::Span<float> lam) {
  for (size_t i = 0; i < lam.size(); ++i) lam[i] = rho * (u[i] - x[i]);
}

void AdmmDualStep(absl::Span<const float> x, absl::Span<const float> z,
                  float rho, absl::Span<float> lam) {
  for (size_t i = 0; i < lam.size(); ++i) lam[i] += rho * (x[i] - z[i]);
}

}  // namespace asgd
