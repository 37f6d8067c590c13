#include "worker/data/examples.h"

#include <algorithm>
#include <numeric>

namespace asgd {

void FillBatch(const ExampleSet& data, absl::Span<const int64_t> ids,
               BatchBuffer* batch) {
  data.Fill(ids, batch->inputs.data(), batch->labels.data());
  if (data.teacher_dim() == 0) {
    batch->teacher.clear();
    return;
  }
  batch->teacher.resize(int64_t{batch->sequences} * batch->steps *
                        data.teacher_dim());
  data.FillTeacher(ids, batch->teacher.data());
}

std::vector<int64_t> EpochOrder(int64_t num_examples, uint64_t seed,
                                uint64_t epoch) {
  std::vector<int64_t> order(num_examples);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + epoch);
  // Fisher-Yates with the raw engine: the same order with every standard
  // library (std::shuffle's use of the engine is unspecified).
  for (int64_t i = num_examples - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

ExampleSampler::ExampleSampler(const ExampleSet* data, uint64_t seed)
    : data_(data), rng_(seed), order_(data->num_examples()) {
  std::iota(order_.begin(), order_.end(), 0);
  std::shuffle(order_.begin(), order_.end(), rng_);
}

void ExampleSampler::Next(BatchBuffer* batch) {
  ids_.resize(batch->sequences);
  for (int64_t& id : ids_) {
    if (next_ == order_.size()) {
      std::shuffle(order_.begin(), order_.end(), rng_);
      next_ = 0;
    }
    id = order_[next_++];
  }
  FillBatch(*data_, ids_, batch);
  drawn_ += batch->sequences;
}

double ExampleSampler::epochs() const {
  return order_.empty() ? 0.0 : static_cast<double>(drawn_) / order_.size();
}

}  // namespace asgd
