// StagingSpy: for tests, a backend that stages minibatches
// (ModelBackend::StageNext) as the CUDA backend does, over another backend
// (the CPU backend): records what StageNext announced (where, and a checksum of
// the values then), takes it as the CUDA backend does during the next
// gradient call, and counts the gradient calls after that which compute the
// batch taken, with the same values. Its resident model is the default
// implementation's (host memory, through ComputeGradient), so the counts
// cover AccumulateGradient too.
//
// Thread-safety: as the wrapped backend (one thread at a time).
#ifndef ASGD_MODEL_STAGING_SPY_H_
#define ASGD_MODEL_STAGING_SPY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include "model/backend.h"

namespace asgd {

class StagingSpy final : public ModelBackend {
 public:
  explicit StagingSpy(std::unique_ptr<ModelBackend> inner)
      : inner_(std::move(inner)) {}
  absl::string_view name() const override { return "staging-spy"; }
  const ModelSpec& spec() const override { return inner_->spec(); }
  int max_rows() const override { return inner_->max_rows(); }
  absl::StatusOr<BatchResult> ComputeGradient(absl::Span<const float> params,
                                              const Batch& batch,
                                              absl::Span<float> grad) override {
    ++calls;
    if (staged_.has_value() && batch.inputs.data() == staged_->inputs &&
        batch.labels.data() == staged_->labels &&
        batch.inputs.size() == staged_->input_count) {
      ++staged_calls;
      if (Checksum(batch) != staged_->checksum) ++changed_since_announced;
    }
    staged_ = std::move(announced_);
    announced_.reset();
    return inner_->ComputeGradient(params, batch, grad);
  }
  absl::Status LogPosteriors(absl::Span<const float> params, const Batch& batch,
                             absl::Span<float> out) override {
    return inner_->LogPosteriors(params, batch, out);
  }
  absl::Status Predict(absl::Span<const float> params, const Batch& batch,
                       absl::Span<int32_t> out) override {
    return inner_->Predict(params, batch, out);
  }
  bool stages_batches() const override { return true; }
  void StageNext(const Batch& next) override {
    ++announcements;
    announced_ = Announced{next.inputs.data(), next.labels.data(),
                           next.inputs.size(), Checksum(next)};
  }

  int calls = 0, staged_calls = 0, announcements = 0;
  int changed_since_announced = 0;

 private:
  static double Checksum(const Batch& b) {
    double sum = 0;
    for (size_t i = 0; i < b.inputs.size(); ++i) sum += b.inputs[i] * (i + 1);
    for (size_t i = 0; i < b.labels.size(); ++i) sum += b.labels[i] * (i + 7);
    return sum;
  }
  struct Announced {
    const float* inputs;
    const int32_t* labels;
    size_t input_count;
    double checksum;
  };
  const std::unique_ptr<ModelBackend> inner_;
  std::optional<Announced> announced_;  // since the last gradient call
  std::optional<Announced> staged_;     // taken by the last gradient call
};

// `backend` itself, or with `staging` wrapped in a StagingSpy, which *spy
// then points to (nullptr otherwise).
inline std::unique_ptr<ModelBackend> MaybeStaging(
    std::unique_ptr<ModelBackend> backend, bool staging, StagingSpy** spy) {
  *spy = nullptr;
  if (!staging) return backend;
  auto owned = std::make_unique<StagingSpy>(std::move(backend));
  *spy = owned.get();
  return owned;
}

}  // namespace asgd

#endif  // ASGD_MODEL_STAGING_SPY_H_
