#include "worker/data/utterances.h"

#include <algorithm>
#include <unordered_map>

namespace asgd {

Utterances Utterances::FromCorpus(
    const corpus::CorpusInfo& info,
    const std::vector<corpus::Utterance>& utterances, int part,
    int num_parts) {
  const int dim = info.feature_dim;
  Utterances out(dim);
  const corpus::FeatureNormaliser normalise(info);
  std::vector<float> normalised;
  for (size_t u = 0; u < utterances.size(); ++u) {
    if (static_cast<int>(u % num_parts) != part) continue;
    const corpus::Utterance& utt = utterances[u];
    normalised.resize(int64_t{utt.num_frames} * dim);
    for (int64_t j = 0; j < static_cast<int64_t>(normalised.size()); ++j) {
      normalised[j] = normalise(static_cast<int>(j % dim), utt.features[j]);
    }
    out.Add(normalised, utt.labels);
  }
  return out;
}

void Utterances::Add(absl::Span<const float> features,
                     absl::Span<const int32_t> labels,
                     absl::Span<const float> teacher) {
  if (labels.empty()) return;
  const int u = num_utterances();
  starts_.push_back(num_frames());
  features_.insert(features_.end(), features.begin(), features.end());
  if (teacher_dim_ > 0) {
    // Exactly labels.size() rows whatever the caller passed, so that
    // teacher(f) never reads past the storage.
    teacher_.insert(teacher_.end(), teacher.begin(), teacher.end());
    teacher_.resize((num_frames() + labels.size()) * teacher_dim_, 0.0f);
  }
  labels_.insert(labels_.end(), labels.begin(), labels.end());
  utterance_.insert(utterance_.end(), labels.size(), u);
}

void Utterances::Clear() {
  features_.clear();
  teacher_.clear();
  labels_.clear();
  utterance_.clear();
  starts_.clear();
}

void Utterances::Reserve(int64_t frames, int64_t utterances) {
  features_.reserve(frames * feature_dim_);
  teacher_.reserve(frames * teacher_dim_);
  labels_.reserve(frames);
  utterance_.reserve(frames);
  starts_.reserve(utterances);
}

double Utterances::MajorityClassRate() const {
  if (labels_.empty()) return 0;
  std::unordered_map<int32_t, int64_t> counts;
  int64_t best = 0;
  for (int32_t l : labels_) best = std::max(best, ++counts[l]);
  return static_cast<double>(best) / labels_.size();
}

}  // namespace asgd
