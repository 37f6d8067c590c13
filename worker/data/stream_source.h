// StreamSource: minibatches from utterances read in passes from a stream,
// with bounded memory, so that a corpus larger than RAM trains.
//
// The source reads utterances from an UtteranceStream (e.g. a Kaldi data
// directory, worker/data/kaldi_data.h) into a window of at most
// `window_bytes`, cuts the window into the model's examples exactly as
// training from memory does (MakeExamples: frames with their context for
// DNN/CNN, chunks with extra context for LSTM/BLSTM; the same code), and
// hands the window's examples out in a seeded random order, any number per
// minibatch; then it reads the next window. A window ends with its pass, so
// that every example of one pass (epoch) goes out before any of the next; a
// minibatch may span two windows. The stream itself reads each pass in a
// fresh order (the Kaldi stream: a random permutation of the utterances
// through a small shuffle buffer), so successive passes mix differently.
// When the window holds a whole pass, each epoch is a full shuffle of the
// pass, as in memory.
//
// Epochs: labelled frames handed out divided by the stream's labelled frames
// per pass. The source reads as many passes as `epochs` needs (0: without
// end) and stops once epochs() reaches it. The examples left at the very
// end, too few for a minibatch, are dropped (one small, noisy last step can
// cost accuracy), unless the data never filled a minibatch: then that one
// goes out with its remaining rows unlabelled (kNoLabel).
//
// Memory: the window (ExampleBytesPerFrame: the utterance storage, a teacher
// row with a teacher, and 16 bytes per frame for the example order and
// chunk index, at most `window_bytes`; one utterance
// larger than that alone), one utterance read ahead, and one minibatch of
// scratch; plus what the stream holds.
//
//   auto stream = KaldiUtteranceStream::Open(input, part, parts);
//   StreamOptions o;
//   o.window_bytes = 256 << 20;  o.seed = 7;  o.epochs = 3;
//   ASGD_ASSIGN_OR_RETURN(auto source, StreamSource::Create(
//       *std::move(stream), spec, data_options, o));
//   BatchBuffer batch(shape.examples, shape.steps, spec.input_dim());
//   while (*source->Next(&batch)) { ... }
//
// Thread-safety: used by one thread, as every BatchSource.
#ifndef ASGD_WORKER_DATA_STREAM_SOURCE_H_
#define ASGD_WORKER_DATA_STREAM_SOURCE_H_

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/model_spec.h"
#include "worker/data/batch_source.h"
#include "worker/data/examples.h"
#include "worker/data/make_examples.h"
#include "worker/data/utterances.h"

namespace asgd {

// Utterances read in passes, features already normalised.
class UtteranceStream {
 public:
  virtual ~UtteranceStream() = default;
  virtual int feature_dim() const = 0;
  // Starts pass `pass` in an order drawn from (seed, pass), dropping what is
  // left of the current one.
  virtual void StartPass(uint64_t seed, uint64_t pass) = 0;
  // Teacher log-posteriors per frame (teacher-student training from an
  // archive); 0: none.
  virtual int teacher_dim() const { return 0; }
  // The next utterance of the pass: `features` [frames × feature_dim()],
  // `labels` [frames], `teacher` [frames × teacher_dim()] (empty without).
  // False at the end of the pass.
  virtual absl::StatusOr<bool> Next(std::vector<float>* features,
                                    std::vector<int32_t>* labels,
                                    std::vector<float>* teacher) = 0;
  // Labelled frames of one pass (may shrink as bad utterances are skipped).
  virtual int64_t frames_per_pass() const = 0;
};

// An UtteranceStream over utterances already in memory (which must outlive
// it), each pass in a random order of (seed, pass): tests, and streaming
// code paths over small data.
class UtterancesStream final : public UtteranceStream {
 public:
  explicit UtterancesStream(const Utterances* utterances)
      : utt_(utterances) {}
  int feature_dim() const override { return utt_->feature_dim(); }
  int teacher_dim() const override { return utt_->teacher_dim(); }
  void StartPass(uint64_t seed, uint64_t pass) override;
  absl::StatusOr<bool> Next(std::vector<float>* features,
                            std::vector<int32_t>* labels,
                            std::vector<float>* teacher) override;
  int64_t frames_per_pass() const override { return utt_->num_frames(); }

 private:
  const Utterances* const utt_;
  std::vector<int> order_;
  size_t next_ = 0;
};

// Bytes a window (or an in-memory example set) holds per frame: the
// utterance storage and 16 bytes of example order and chunk index.
inline int64_t ExampleBytesPerFrame(int feature_dim, int teacher_dim = 0) {
  return Utterances::BytesPerFrame(feature_dim, teacher_dim) + 16;
}

struct StreamOptions {
  int64_t window_bytes = int64_t{256} << 20;  // > 0
  uint64_t seed = 1;  // of the window order and the stream's passes
  double epochs = 1;  // passes over the stream; 0: no limit
};

struct StreamStats {
  int64_t windows = 0;            // windows read
  int64_t passes = 0;             // passes started
  int64_t peak_window_frames = 0;
  int64_t peak_window_bytes = 0;  // ExampleBytesPerFrame × frames
  int64_t window_frame_limit = 0;
};

class StreamSource final : public BatchSource {
 public:
  // InvalidArgument for bad options or data options; FailedPrecondition
  // when the stream's features are not the model's, or it has no labelled
  // frames.
  static absl::StatusOr<std::unique_ptr<StreamSource>> Create(
      std::unique_ptr<UtteranceStream> stream, const ModelSpec& spec,
      const DataOptions& data, const StreamOptions& options);

  // Fills `batch` (batch->sequences examples of batch->steps rows, the
  // model's input rows); false when the epochs are used up. Errors of the
  // stream (e.g. refused bad data) are returned as they are.
  absl::StatusOr<bool> Next(BatchBuffer* batch) override;
  double epochs() const override;

  const UtteranceStream& stream() const { return *stream_; }
  StreamStats stats() const { return stats_; }

 private:
  StreamSource(std::unique_ptr<UtteranceStream> stream, const ModelSpec& spec,
               const DataOptions& data, const StreamOptions& options);
  // Reads the next utterance of the pass into pending_; false (and
  // pass_ended_) at the end of the pass.
  absl::StatusOr<bool> ReadPending();
  // Starts the next pass if the epochs need one; false when they do not.
  absl::StatusOr<bool> StartNextPass();
  // Reads the next window and orders its examples; false at the end.
  absl::StatusOr<bool> LoadWindow();

  const std::unique_ptr<UtteranceStream> stream_;
  const ModelSpec spec_;
  const DataOptions data_;
  const StreamOptions options_;
  const int64_t max_window_frames_;
  std::mt19937_64 rng_;

  Utterances window_;
  std::unique_ptr<ExampleSet> examples_;  // over window_
  std::vector<int64_t> order_;
  size_t cursor_ = 0;

  std::vector<float> pending_features_;
  std::vector<float> pending_teacher_;
  std::vector<int32_t> pending_labels_;
  bool have_pending_ = false;
  bool pass_ended_ = false;
  bool stream_done_ = false;
  int64_t frames_this_pass_ = 0;

  std::vector<int64_t> ids_;
  std::unique_ptr<BatchBuffer> scratch_;  // a minibatch split over windows
  int64_t labelled_drawn_ = 0;
  int64_t full_batches_ = 0;
  StreamStats stats_;
};

}  // namespace asgd

#endif  // ASGD_WORKER_DATA_STREAM_SOURCE_H_
