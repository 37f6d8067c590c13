#include "worker/trainer.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace asgd {

absl::StatusOr<double> EvaluateAccuracy(DnnBackend* backend,
                                        absl::Span<const float> params,
                                        const FrameData& data, int batch) {
  if (data.num_frames() == 0) {
    return absl::FailedPreconditionError("no frames to evaluate");
  }
  std::vector<float> inputs(int64_t{batch} * data.input_dim());
  std::vector<int32_t> predicted(batch);
  int64_t correct = 0;
  for (int64_t start = 0; start < data.num_frames(); start += batch) {
    const int n = static_cast<int>(std::min<int64_t>(batch, data.num_frames() - start));
    for (int i = 0; i < n; ++i) {
      data.Splice(start + i, inputs.data() + int64_t{i} * data.input_dim());
    }
    ASGD_RETURN_IF_ERROR(backend->Predict(
        params, absl::MakeConstSpan(inputs.data(), int64_t{n} * data.input_dim()),
        absl::MakeSpan(predicted.data(), n)));
    for (int i = 0; i < n; ++i) correct += predicted[i] == data.label(start + i);
  }
  return static_cast<double>(correct) / data.num_frames();
}

absl::Status CheckModelMatchesLayout(const DnnSpec& spec,
                                     const ModelLayout& layout) {
  const std::vector<TensorSpec> want = DnnTensors(spec);
  bool same = want.size() == layout.tensors().size();
  for (size_t i = 0; same && i < want.size(); ++i) {
    same = want[i].name == layout.tensors()[i].name &&
           want[i].shape == layout.tensors()[i].shape;
  }
  if (!same) {
    return absl::FailedPreconditionError(
        "the pool's model does not have the DNN layout this worker expects");
  }
  return absl::OkStatus();
}

absl::StatusOr<DnnSpec> DnnSpecFromPool(const ParamClient& client) {
  const ModelLayout& layout = client.layout();
  const auto& tensors = layout.tensors();
  if (tensors.size() < 2 || tensors.size() % 2 != 0 ||
      tensors[0].shape.size() != 2) {
    return absl::FailedPreconditionError(
        "the pool's model is not a DNN (want layer<i>/weight, layer<i>/bias)");
  }
  DnnSpec spec;
  spec.input_dim = static_cast<int>(tensors[0].shape[1]);
  spec.hidden.clear();
  const int layers = static_cast<int>(tensors.size() / 2);
  for (int l = 0; l + 1 < layers; ++l) {
    if (tensors[2 * l].shape.empty()) {
      return absl::FailedPreconditionError("bad weight tensor shape");
    }
    spec.hidden.push_back(static_cast<int>(tensors[2 * l].shape[0]));
  }
  spec.num_classes = static_cast<int>(tensors[2 * (layers - 1)].shape[0]);
  auto it = client.attributes().find("activation");
  ASGD_ASSIGN_OR_RETURN(
      spec.activation,
      ParseActivation(it == client.attributes().end() ? "relu" : it->second));
  ASGD_RETURN_IF_ERROR(CheckModelMatchesLayout(spec, layout));
  return spec;
}

Trainer::Trainer(ParamClient* client, DnnBackend* backend,
                 const FrameData* train, const FrameData* heldout,
                 const TrainerOptions& options, std::ostream* log)
    : client_(client),
      backend_(backend),
      train_(train),
      heldout_(heldout),
      options_(options),
      log_(log) {}

absl::StatusOr<TrainResult> Trainer::Run() {
  ASGD_RETURN_IF_ERROR(
      CheckModelMatchesLayout(backend_->spec(), client_->layout()));
  if (train_->num_frames() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", options_.worker_index,
        " has no training frames (more workers than utterances?)"));
  }
  if (train_->input_dim() != backend_->spec().input_dim) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the corpus gives ", train_->input_dim(),
        " inputs per frame but the model takes ", backend_->spec().input_dim));
  }
  const int64_t total = client_->layout().total_size();
  const int batch = options_.batch_size;
  TrainResult result;
  result.params.resize(total);
  std::vector<float> grad(total);
  std::vector<float> inputs(int64_t{batch} * train_->input_dim());
  std::vector<int32_t> labels(batch);
  std::vector<uint64_t> versions;
  MinibatchSampler sampler(train_, options_.seed * 7919 + options_.worker_index);

  const absl::Time start = absl::Now();
  absl::Time window_start = start;
  int64_t window_frames = 0, window_correct = 0;
  double window_loss = 0;
  uint64_t window_staleness = 0;
  auto done = [&] {
    return (options_.max_steps > 0 && result.steps >= options_.max_steps) ||
           (options_.epochs > 0 && sampler.epochs() >= options_.epochs);
  };
  while (!done()) {
    ASGD_RETURN_IF_ERROR(client_->Pull(absl::MakeSpan(result.params), &versions));
    sampler.Next(batch, absl::MakeSpan(inputs), absl::MakeSpan(labels));
    ASGD_ASSIGN_OR_RETURN(
        BatchResult r, backend_->ComputeGradient(result.params, inputs, labels,
                                                 absl::MakeSpan(grad)));
    ASGD_ASSIGN_OR_RETURN(PushOutcome push, client_->Push(grad, versions, 1));
    ++result.steps;
    result.frames += batch;
    result.last_loss = r.loss;
    result.pushes_dropped += push.dropped;
    window_frames += batch;
    window_correct += r.correct;
    window_loss += r.loss * batch;
    window_staleness = std::max(window_staleness, push.max_staleness);

    if (log_ != nullptr && options_.log_every > 0 &&
        (result.steps % options_.log_every == 0 || done())) {
      const double secs = absl::ToDoubleSeconds(absl::Now() - window_start);
      *log_ << absl::StrFormat(
                   "worker %d step %d epoch %.2f loss %.3f batch-acc %.1f%% "
                   "frames/s %.0f max-staleness %d",
                   options_.worker_index, result.steps, sampler.epochs(),
                   window_loss / window_frames,
                   100.0 * window_correct / window_frames,
                   window_frames / std::max(secs, 1e-9), window_staleness)
            << std::endl;
      window_start = absl::Now();
      window_frames = window_correct = 0;
      window_loss = 0;
      window_staleness = 0;
    }
    if (heldout_ != nullptr && options_.eval_every > 0 &&
        result.steps % options_.eval_every == 0) {
      ASGD_ASSIGN_OR_RETURN(double acc, EvaluateAccuracy(backend_, result.params,
                                                         *heldout_, batch));
      if (log_ != nullptr) {
        *log_ << absl::StrFormat("worker %d step %d held-out frame accuracy: %.1f%%",
                                 options_.worker_index, result.steps, 100 * acc)
              << std::endl;
      }
    }
  }
  // Evaluate the freshest model: every worker's last push included.
  ASGD_RETURN_IF_ERROR(client_->Pull(absl::MakeSpan(result.params), &versions));
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (heldout_ != nullptr && heldout_->num_frames() > 0) {
    ASGD_ASSIGN_OR_RETURN(result.heldout_accuracy,
                          EvaluateAccuracy(backend_, result.params, *heldout_,
                                           batch));
  }
  return result;
}

}  // namespace asgd
