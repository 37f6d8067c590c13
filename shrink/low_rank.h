// Low-rank factorization of a trained model's dense layers: each chosen
// layer's weight W (units × in) is replaced by the product of two thin ones
// from its truncated SVD (svd.h),
//
//   W ≈ A · B,  B = sqrt(S_r) Vᵀ_r  (rank × in),  A = U_r sqrt(S_r)  (units × rank),
//
// written as model data: a linear bottleneck layer dense(rank, none) with
// weight B and bias 0, followed by the layer itself with weight A and its
// original bias. The result is an ordinary ModelSpec that the servers load
// as a warm start (asgd_server --init_model) and retrain like any other;
// nothing else in asgd knows it was factored. At full rank the factored
// layer computes the same function (up to float rounding); at rank r the
// Frobenius error |W - A B| is sqrt(sum of the dropped s_i²)
// (Eckart–Young), reported per layer.
//
// Which layers: hidden dense layers by index, and the output layer as
// index spec.layers.size(). Conv and LSTM layers are refused.
//
// Thread-safety: a pure function.
#ifndef ASGD_SHRINK_LOW_RANK_H_
#define ASGD_SHRINK_LOW_RANK_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "model/model_file.h"
#include "model/model_spec.h"

namespace asgd {

// One layer to factor: to `rank` when rank > 0, else to the smallest rank
// that keeps at least `energy` (in (0, 1]) of sum s_i².
struct LayerRank {
  int layer = 0;
  int rank = 0;
  double energy = 0;
};

struct FactoredLayer {
  int layer = 0;           // index in the input model
  int64_t units = 0;       // rows of W
  int64_t inputs = 0;      // columns of W
  int rank = 0;            // chosen
  double kept_energy = 0;  // sum of the kept s_i² / sum of all
  double relative_error = 0;  // |W - A B|_F / |W|_F
  int64_t params_before = 0;  // W and bias
  int64_t params_after = 0;   // B, its zero bias, A and the bias
};

struct LowRankResult {
  SavedModel model;
  std::vector<FactoredLayer> layers;  // in layer order
};

// InvalidArgument naming the layer for: an index outside [0, layers], a
// layer listed twice, a conv or LSTM layer, a rank outside
// [1, min(units, inputs)], an energy outside (0, 1], neither given, or
// params not matching the spec (and whatever ComputeSvd refuses); also when
// the result would exceed ValidateModelSpec's bounds.
absl::StatusOr<LowRankResult> FactorLowRank(const ModelSpec& spec,
                                            absl::Span<const float> params,
                                            std::vector<LayerRank> layers);

// Parses a --factor list: comma-separated items LAYER or LAYER:RANK, where
// LAYER is a hidden layer's index, "output", or "all" (every dense layer and
// the output layer, except, with `rank`, those whose full rank is at most
// `rank`: factoring would not shrink them); an item without a rank takes
// `rank` (when > 0) or `energy`. InvalidArgument for anything else; FactorLowRank checks the
// layers against the model.
absl::StatusOr<std::vector<LayerRank>> ParseLayerRanks(absl::string_view text,
                                                       const ModelSpec& spec,
                                                       int rank, double energy);

// The rank that keeps at least `energy` of sum s_i² (s descending): the
// smallest r with sum_{i<r} s_i² >= energy * sum s_i²; at least 1.
int RankForEnergy(absl::Span<const double> s, double energy);

}  // namespace asgd

#endif  // ASGD_SHRINK_LOW_RANK_H_
