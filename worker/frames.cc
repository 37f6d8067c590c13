#include "worker/frames.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <unordered_map>

namespace asgd {

FrameData::FrameData(const corpus::CorpusInfo& info,
                     const std::vector<corpus::Utterance>& utterances,
                     int context, int part, int num_parts)
    : feature_dim_(info.feature_dim), context_(context) {
  std::vector<float> inv_std(feature_dim_, 1.0f);
  for (int d = 0; d < feature_dim_; ++d) {
    if (d < static_cast<int>(info.stddev.size()) && info.stddev[d] > 1e-6f) {
      inv_std[d] = 1.0f / info.stddev[d];
    }
  }
  for (size_t u = 0; u < utterances.size(); ++u) {
    if (static_cast<int>(u % num_parts) != part) continue;
    const corpus::Utterance& utt = utterances[u];
    const int64_t begin = num_frames();
    const int64_t end = begin + utt.num_frames;
    for (int t = 0; t < utt.num_frames; ++t) {
      for (int d = 0; d < feature_dim_; ++d) {
        const float mean = d < static_cast<int>(info.mean.size()) ? info.mean[d] : 0;
        features_.push_back(
            (utt.features[int64_t{t} * feature_dim_ + d] - mean) * inv_std[d]);
      }
      labels_.push_back(utt.labels[t]);
      utt_begin_.push_back(begin);
      utt_end_.push_back(end);
    }
  }
}

void FrameData::Splice(int64_t frame, float* out) const {
  for (int k = -context_; k <= context_; ++k) {
    const int64_t f =
        std::clamp(frame + k, utt_begin_[frame], utt_end_[frame] - 1);
    std::memcpy(out, &features_[f * feature_dim_], feature_dim_ * sizeof(float));
    out += feature_dim_;
  }
}

double FrameData::MajorityClassRate() const {
  if (labels_.empty()) return 0;
  std::unordered_map<int32_t, int64_t> counts;
  int64_t best = 0;
  for (int32_t l : labels_) best = std::max(best, ++counts[l]);
  return static_cast<double>(best) / labels_.size();
}

std::vector<int64_t> EpochOrder(int64_t num_frames, uint64_t seed,
                                uint64_t epoch) {
  std::vector<int64_t> order(num_frames);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + epoch);
  // Fisher-Yates with the raw engine: the same order with every standard
  // library (std::shuffle's use of the engine is unspecified).
  for (int64_t i = num_frames - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

MinibatchSampler::MinibatchSampler(const FrameData* data, uint64_t seed)
    : data_(data), rng_(seed), order_(data->num_frames()) {
  std::iota(order_.begin(), order_.end(), 0);
  std::shuffle(order_.begin(), order_.end(), rng_);
}

void MinibatchSampler::Next(int n, absl::Span<float> inputs,
                            absl::Span<int32_t> labels) {
  const int dim = data_->input_dim();
  for (int i = 0; i < n; ++i) {
    if (next_ == order_.size()) {
      std::shuffle(order_.begin(), order_.end(), rng_);
      next_ = 0;
    }
    const int64_t f = order_[next_++];
    data_->Splice(f, inputs.data() + int64_t{i} * dim);
    labels[i] = data_->label(f);
  }
  drawn_ += n;
}

double MinibatchSampler::epochs() const {
  return order_.empty() ? 0.0 : static_cast<double>(drawn_) / order_.size();
}

}  // namespace asgd
