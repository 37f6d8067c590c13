#include "shrink/prune.h"

#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "model/prune_mask.h"

namespace asgd {
namespace {

SavedModel SmallModel() {
  SavedModel m;
  m.spec.feature_dim = 12;
  m.spec.context = 1;
  m.spec.layers = {LayerSpec::Dense(24, Activation::kRelu),
                   LayerSpec::Dense(20, Activation::kTanh)};
  m.spec.num_classes = 10;
  m.params = InitialParams(m.spec, 4);
  for (size_t i = 0; i < m.params.size(); ++i) {
    if (m.params[i] == 0.0f) m.params[i] = 1e-3f * (i % 7 + 1);  // biases
  }
  return m;
}

struct Region {
  std::string name;
  int64_t offset, size;
};

std::vector<Region> Regions(const ModelSpec& spec) {
  std::vector<Region> out;
  int64_t offset = 0;
  for (const TensorSpec& t : ModelTensors(spec)) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    out.push_back({t.name, offset, n});
    offset += n;
  }
  return out;
}

// Over `regions`: how many are zero, and whether every zero had a |w| no
// larger than every kept weight.
void ExpectSmallestPruned(const SavedModel& before, const SavedModel& after,
                          const std::vector<Region>& regions, int64_t want) {
  int64_t zeros = 0;
  float largest_pruned = 0, smallest_kept = std::numeric_limits<float>::max();
  for (const Region& r : regions) {
    for (int64_t i = r.offset; i < r.offset + r.size; ++i) {
      if (after.params[i] == 0.0f) {
        ++zeros;
        largest_pruned = std::max(largest_pruned, std::fabs(before.params[i]));
      } else {
        ASSERT_EQ(after.params[i], before.params[i]);
        smallest_kept = std::min(smallest_kept, std::fabs(after.params[i]));
      }
    }
  }
  EXPECT_EQ(zeros, want);
  EXPECT_LE(largest_pruned, smallest_kept);
}

TEST(PruneTest, GlobalPrunesTheSmallestWeightsOfTheWholeModel) {
  const SavedModel m = SmallModel();
  PruneOptions o;
  o.sparsity = 0.7;
  absl::StatusOr<PruneResult> r = PruneByMagnitude(m, o);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<Region> weights;
  for (const Region& region : Regions(m.spec)) {
    if (absl::EndsWith(region.name, "bias")) {
      for (int64_t i = region.offset; i < region.offset + region.size; ++i) {
        ASSERT_EQ(r->model.params[i], m.params[i]);  // biases untouched
      }
    } else {
      weights.push_back(region);
    }
  }
  const int64_t n = 24 * 36 + 20 * 24 + 10 * 20;
  ExpectSmallestPruned(m, r->model, weights, static_cast<int64_t>(0.7 * n));
  EXPECT_EQ(r->model.pruned, (std::vector<std::string>{
                                 "layer0/weight", "layer1/weight",
                                 "layer2/weight"}));
  EXPECT_EQ(r->pruned, static_cast<int64_t>(0.7 * n));
  EXPECT_EQ(CountPruned(KeepMask(r->model.spec, r->model.params,
                                 r->model.pruned)),
            r->pruned);
}

TEST(PruneTest, PerTensorPrunesTheShareOfEach) {
  const SavedModel m = SmallModel();
  PruneOptions o;
  o.sparsity = 0.5;
  o.per_tensor = true;
  o.tensors = {"layer2/weight", "layer0/weight"};
  absl::StatusOr<PruneResult> r = PruneByMagnitude(m, o);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const Region& region : Regions(m.spec)) {
    if (region.name == "layer0/weight" || region.name == "layer2/weight") {
      ExpectSmallestPruned(m, r->model, {region}, region.size / 2);
    } else {
      ExpectSmallestPruned(m, r->model, {region}, 0);
    }
  }
  EXPECT_EQ(r->model.pruned,
            (std::vector<std::string>{"layer0/weight", "layer2/weight"}));
  ASSERT_EQ(r->tensors.size(), 2u);
  EXPECT_EQ(r->tensors[1].pruned, 100);

  // Pruning again at a lower share keeps what was pruned.
  o.sparsity = 0.2;
  absl::StatusOr<PruneResult> again = PruneByMagnitude(r->model, o);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->model.params, r->model.params);
  EXPECT_EQ(again->pruned, r->pruned);
}

TEST(PruneTest, RefusesBadRequests) {
  const SavedModel m = SmallModel();
  for (double s : {-0.1, 1.0, 1.5, std::nan("")}) {
    PruneOptions o;
    o.sparsity = s;
    EXPECT_EQ(PruneByMagnitude(m, o).status().code(),
              absl::StatusCode::kInvalidArgument)
        << s;
  }
  PruneOptions o;
  o.sparsity = 0.5;
  o.tensors = {"layer5/weight"};
  EXPECT_EQ(PruneByMagnitude(m, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.tensors = {"layer0/weight", "layer0/weight"};
  EXPECT_EQ(PruneByMagnitude(m, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  SavedModel short_model = m;
  short_model.params.pop_back();
  o.tensors = {};
  EXPECT_EQ(PruneByMagnitude(short_model, o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
