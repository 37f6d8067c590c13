#include "worker/data/stream_source.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace asgd {

void UtterancesStream::StartPass(uint64_t seed, uint64_t pass) {
  order_ = std::vector<int>(utt_->num_utterances());
  std::iota(order_.begin(), order_.end(), 0);
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + pass);
  std::shuffle(order_.begin(), order_.end(), rng);
  next_ = 0;
}

absl::StatusOr<bool> UtterancesStream::Next(std::vector<float>* features,
                                            std::vector<int32_t>* labels,
                                            std::vector<float>* teacher) {
  if (next_ >= order_.size()) return false;
  const int u = order_[next_++];
  const int64_t begin = utt_->begin(u), end = utt_->end(u);
  const int dim = utt_->feature_dim();
  features->assign(utt_->frame(begin), utt_->frame(begin) + (end - begin) * dim);
  labels->resize(end - begin);
  for (int64_t f = begin; f < end; ++f) (*labels)[f - begin] = utt_->label(f);
  teacher->clear();
  if (utt_->teacher_dim() > 0) {
    teacher->assign(utt_->teacher(begin),
                    utt_->teacher(begin) + (end - begin) * utt_->teacher_dim());
  }
  return true;
}

StreamSource::StreamSource(std::unique_ptr<UtteranceStream> stream,
                           const ModelSpec& spec, const DataOptions& data,
                           const StreamOptions& options)
    : stream_(std::move(stream)),
      spec_(spec),
      data_(data),
      options_(options),
      max_window_frames_(std::max<int64_t>(
          1, options.window_bytes / ExampleBytesPerFrame(
                                         spec.feature_dim,
                                         stream_->teacher_dim()))),
      rng_(options.seed * 0x9e3779b97f4a7c15ull + 11),
      window_(spec.feature_dim, stream_->teacher_dim()) {
  stats_.window_frame_limit = max_window_frames_;
}

absl::StatusOr<std::unique_ptr<StreamSource>> StreamSource::Create(
    std::unique_ptr<UtteranceStream> stream, const ModelSpec& spec,
    const DataOptions& data, const StreamOptions& options) {
  if (stream == nullptr || options.window_bytes <= 0 || options.epochs < 0) {
    return absl::InvalidArgumentError(
        "StreamSource: a stream, window_bytes > 0 and epochs >= 0 are needed");
  }
  ASGD_RETURN_IF_ERROR(ValidateDataOptions(data));
  if (stream->feature_dim() != spec.feature_dim) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the data has ", stream->feature_dim(),
        " features per frame but the model takes ", spec.feature_dim));
  }
  if (stream->frames_per_pass() <= 0) {
    return absl::FailedPreconditionError(
        "no labelled frames to train on (more workers than utterances, or "
        "every utterance bad?)");
  }
  auto source = std::unique_ptr<StreamSource>(
      new StreamSource(std::move(stream), spec, data, options));
  // The window's storage, once (a larger utterance grows it).
  source->window_.Reserve(source->max_window_frames_,
                          source->max_window_frames_ / 64 + 1);
  source->stream_->StartPass(options.seed, 0);
  source->stats_.passes = 1;
  return source;
}

double StreamSource::epochs() const {
  const int64_t per_pass = stream_->frames_per_pass();
  return per_pass <= 0 ? static_cast<double>(stats_.passes)
                       : static_cast<double>(labelled_drawn_) / per_pass;
}

absl::StatusOr<bool> StreamSource::ReadPending() {
  while (true) {
    ASGD_ASSIGN_OR_RETURN(bool more,
                          stream_->Next(&pending_features_, &pending_labels_,
                                        &pending_teacher_));
    if (!more) {
      pass_ended_ = true;
      return false;
    }
    if (pending_labels_.empty()) continue;
    frames_this_pass_ += static_cast<int64_t>(pending_labels_.size());
    have_pending_ = true;
    return true;
  }
}

absl::StatusOr<bool> StreamSource::StartNextPass() {
  if (frames_this_pass_ == 0) {
    return absl::FailedPreconditionError(
        "a whole pass over the data gave no labelled frame (every utterance "
        "skipped as bad?)");
  }
  if (options_.epochs > 0 &&
      static_cast<double>(stats_.passes) >= std::ceil(options_.epochs)) {
    stream_done_ = true;
    return false;
  }
  stream_->StartPass(options_.seed, static_cast<uint64_t>(stats_.passes));
  ++stats_.passes;
  frames_this_pass_ = 0;
  pass_ended_ = false;
  return true;
}

absl::StatusOr<bool> StreamSource::LoadWindow() {
  window_.Clear();
  examples_.reset();
  while (!stream_done_) {
    if (!have_pending_) {
      if (pass_ended_) {
        // A window ends with its pass, so that passes are epochs: every
        // example of one is handed out before any of the next.
        if (window_.num_frames() > 0) break;
        ASGD_ASSIGN_OR_RETURN(bool next, StartNextPass());
        if (!next) break;
      }
      ASGD_ASSIGN_OR_RETURN(bool more, ReadPending());
      if (!more) continue;
    }
    const int64_t frames = static_cast<int64_t>(pending_labels_.size());
    if (window_.num_frames() > 0 &&
        window_.num_frames() + frames > max_window_frames_) {
      break;  // it starts the next window
    }
    window_.Add(pending_features_, pending_labels_, pending_teacher_);
    have_pending_ = false;
  }
  if (window_.num_frames() == 0) return false;
  ASGD_ASSIGN_OR_RETURN(examples_, MakeExamples(spec_, &window_, data_));
  order_.resize(examples_->num_examples());
  std::iota(order_.begin(), order_.end(), 0);
  std::shuffle(order_.begin(), order_.end(), rng_);
  cursor_ = 0;
  ++stats_.windows;
  stats_.peak_window_frames =
      std::max(stats_.peak_window_frames, window_.num_frames());
  stats_.peak_window_bytes =
      stats_.peak_window_frames *
      ExampleBytesPerFrame(spec_.feature_dim, window_.teacher_dim());
  return true;
}

absl::StatusOr<bool> StreamSource::Next(BatchBuffer* batch) {
  if (options_.epochs > 0 && epochs() >= options_.epochs) return false;
  const int n = batch->sequences;
  const int steps = batch->steps;
  const int64_t dim = spec_.input_dim();
  const int heads = spec_.output_frames;
  if (batch->labels.size() != static_cast<size_t>(n) * steps * heads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "StreamSource: a minibatch with ", batch->labels.size(),
        " labels for ", n, " x ", steps, " rows of ", heads, " labels"));
  }
  const int64_t teacher_dim = stream_->teacher_dim();
  batch->teacher.resize(int64_t{n} * steps * teacher_dim);
  int filled = 0;
  while (filled < n) {
    if (examples_ == nullptr || cursor_ == order_.size()) {
      ASGD_ASSIGN_OR_RETURN(bool more, LoadWindow());
      if (!more) break;
    }
    if (examples_->steps() != steps) {
      return absl::InvalidArgumentError(
          absl::StrCat("StreamSource: a minibatch of ", steps,
                       " steps for examples of ", examples_->steps()));
    }
    const int take = static_cast<int>(
        std::min<int64_t>(n - filled, order_.size() - cursor_));
    ids_.assign(order_.begin() + cursor_, order_.begin() + cursor_ + take);
    cursor_ += take;
    if (filled == 0 && take == n) {
      FillBatch(*examples_, ids_, batch);
    } else {
      // Rows of a time-major part: step t of example b is row t * take + b;
      // in the minibatch it is row t * n + filled + b.
      if (scratch_ == nullptr || scratch_->sequences < take) {
        scratch_ = std::make_unique<BatchBuffer>(n, steps, spec_.input_dim(),
                                                 heads);
      }
      examples_->Fill(ids_, scratch_->inputs.data(), scratch_->labels.data());
      if (teacher_dim > 0) {
        scratch_->teacher.resize(int64_t{n} * steps * teacher_dim);
        examples_->FillTeacher(ids_, scratch_->teacher.data());
      }
      for (int t = 0; t < steps; ++t) {
        const int64_t from = int64_t{t} * take, to = int64_t{t} * n + filled;
        std::memcpy(batch->inputs.data() + to * dim,
                    scratch_->inputs.data() + from * dim,
                    sizeof(float) * dim * take);
        std::memcpy(batch->labels.data() + to * heads,
                    scratch_->labels.data() + from * heads,
                    sizeof(int32_t) * take * heads);
        std::copy_n(scratch_->teacher.data() + from * teacher_dim,
                    take * teacher_dim,
                    batch->teacher.data() + to * teacher_dim);
      }
    }
    filled += take;
  }
  if (filled == 0) return false;
  if (filled < n) {
    // The end of the data. A last, smaller minibatch is a noisier step at
    // the very end of training (on the demo corpus one such step costs
    // points of held-out accuracy): it is dropped, as the shared pool drops
    // it, unless the data never filled one, when it goes out padded.
    if (full_batches_ > 0) {
      stream_done_ = true;
      return false;
    }
    for (int t = 0; t < steps; ++t) {
      const int64_t row = int64_t{t} * n + filled;
      std::fill(batch->inputs.begin() + row * dim,
                batch->inputs.begin() + (row + n - filled) * dim, 0.0f);
      std::fill(batch->labels.begin() + row * heads,
                batch->labels.begin() + (row + n - filled) * heads, kNoLabel);
      std::fill(batch->teacher.begin() + row * teacher_dim,
                batch->teacher.begin() + (row + n - filled) * teacher_dim,
                0.0f);  // unlabelled rows: finite, unused
    }
  }
  // Frames drawn: a multi-frame row's first head is its own frame.
  for (size_t i = 0; i < batch->labels.size(); i += heads) {
    labelled_drawn_ += batch->labels[i] != kNoLabel;
  }
  full_batches_ += filled == n;
  return true;
}

}  // namespace asgd
