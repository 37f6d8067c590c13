// The update rules of consensus training (asgd_worker --mode=easgd,
// --mode=admm), elementwise over a worker's flat model x, the consensus z
// it last pulled from the servers, and (ADMM) its dual variables lam. The
// trainer (consensus_trainer.h) calls them in this order; each is checked
// against hand-computed values in consensus_rules_test.
//
// EASGD (elastic averaging SGD, asynchronous form): between communications
// a worker takes tau local SGD steps x -= lr * g. At a communication it
// pulls z, and with the elastic difference e = alpha * (x - z) moves both
// ends of the spring toward each other: the servers add +e to z (an ADD
// push), the worker subtracts it from x (ElasticStep).
//
// ADMM (consensus form, scaled by rho, asynchronous): worker i minimizes
//   f_i(x) + lam . (x - z) + rho/2 |x - z|^2
// by tau SGD steps on g + lam + rho * (x - z) (AugmentAdmmGradient), then
// sends its point u_i = x_i + lam_i / rho (AdmmPoint). The consensus is the
// average of every worker's u_i: the servers keep each worker slot's last
// u_i and replace it in their average (an ADMM push, step/admm_apply.h).
// Then the worker pulls the new z and updates its duals: lam += rho * (x - z)
// (AdmmDualStep). A worker that takes over a slot (restarted in a dead
// one's place) starts from x = z with the dual that gives the slot's point:
// lam = rho * (u_slot - x) (AdmmDualOfPoint), so z does not move when it
// joins.
//
// Arithmetic: float32, each elementwise expression evaluated left to right
// as written here. (How far a worker is from the consensus, |x - z|, is
// worker/peer/peer_model.h's L2Distance.)
//
// Thread-safety: pure functions over caller-owned buffers.
#ifndef ASGD_WORKER_CONSENSUS_CONSENSUS_RULES_H_
#define ASGD_WORKER_CONSENSUS_CONSENSUS_RULES_H_

#include "absl/types/span.h"

namespace asgd {

// The local SGD step: x -= lr * g.
void SgdStep(absl::Span<const float> g, float lr, absl::Span<float> x);

// e = alpha * (x - z).
void ElasticDifference(absl::Span<const float> x, absl::Span<const float> z,
                       float alpha, absl::Span<float> e);

// x -= e (the caller passes the slices of the servers that applied +e).
void ElasticStep(absl::Span<const float> e, absl::Span<float> x);

// g += lam + rho * (x - z): the augmented Lagrangian's gradient.
void AugmentAdmmGradient(absl::Span<const float> x, absl::Span<const float> z,
                         absl::Span<const float> lam, float rho,
                         absl::Span<float> g);

// u = x + lam / rho.
void AdmmPoint(absl::Span<const float> x, absl::Span<const float> lam,
               float rho, absl::Span<float> u);

// lam = rho * (u - x): the dual that makes x's point u.
void AdmmDualOfPoint(absl::Span<const float> u, absl::Span<const float> x,
                     float rho, absl::Span<float> lam);

// lam += rho * (x - z).
void AdmmDualStep(absl::Span<const float> x, absl::Span<const float> z,
                  float rho, absl::Span<float> lam);

}  // namespace asgd

#endif  // ASGD_WORKER_CONSENSUS_CONSENSUS_RULES_H_
