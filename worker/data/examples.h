// ExampleSet: what a training loop draws minibatches from, whatever the
// model. An example is one input row with its label for a frame model (a
// frame and its context), or a chunk of consecutive frames of one utterance
// for a sequence model; Fill() writes a set of examples as one Batch of the
// layout model/backend.h defines (time-major rows, kNoLabel on context
// rows).
//
// ExampleSampler walks the examples in a fresh seeded random order each
// epoch; EpochOrder() is the order every worker derives identically for the
// shared minibatch pool.
//
// Thread-safety: ExampleSet implementations are immutable and may be shared;
// an ExampleSampler is used by one thread.
#ifndef ASGD_WORKER_DATA_EXAMPLES_H_
#define ASGD_WORKER_DATA_EXAMPLES_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/types/span.h"
#include "model/backend.h"

namespace asgd {

class ExampleSet {
 public:
  virtual ~ExampleSet() = default;

  virtual int64_t num_examples() const = 0;
  // Values per row (the model's input_dim()).
  virtual int input_dim() const = 0;
  // Rows per example: 1 for frames, the chunk's steps for sequences.
  virtual int steps() const = 0;
  // At most this many rows of an example are labelled (1 for frames, the
  // chunk length for sequences).
  virtual int max_labelled_steps() const = 0;
  // Labelled rows over all examples (each labelled frame counts once).
  virtual int64_t labelled_frames() const = 0;
  // Labels per row: the model's output_frames (1 but for multi-frame
  // models).
  virtual int labels_per_row() const { return 1; }
  // Writes examples `ids` as one batch of ids.size() sequences × steps()
  // rows: `inputs` [rows, input_dim()], `labels` [rows, labels_per_row()],
  // row t * n + b being step t of example ids[b]. Ids must be in
  // [0, num_examples()).
  virtual void Fill(absl::Span<const int64_t> ids, float* inputs,
                    int32_t* labels) const = 0;
  // Teacher log-posteriors per row (teacher-student training from an
  // archive); 0: none.
  virtual int teacher_dim() const { return 0; }
  // teacher_dim() > 0: writes the rows of Fill(ids, ...) their teacher's
  // log-posteriors, [rows, teacher_dim()] (a row without a label of its own
  // gets its nearest frame's: finite, and not used).
  virtual void FillTeacher(absl::Span<const int64_t> ids,
                           float* teacher) const {}
  // The accuracy of always guessing the most frequent label.
  virtual double MajorityClassRate() const = 0;
};

// A batch's storage, sized for `sequences` examples of `steps` rows, with
// `labels_per_row` labels each (ExampleSet::labels_per_row()).
struct BatchBuffer {
  BatchBuffer(int sequences, int steps, int input_dim, int labels_per_row = 1)
      : sequences(sequences),
        steps(steps),
        inputs(int64_t{sequences} * steps * input_dim),
        labels(int64_t{sequences} * steps * labels_per_row) {}
  int sequences;
  int steps;
  std::vector<float> inputs;
  std::vector<int32_t> labels;
  // Filled by FillBatch from data with a teacher (else empty); the backend
  // (model/teacher_backend.h) sets the weight and the temperature.
  std::vector<float> teacher;
  Batch view() const {
    Batch b{sequences, steps, inputs, labels};
    b.teacher = teacher;
    return b;
  }
};

// data.Fill(ids, ...) into `batch` (ids.size() == batch->sequences), and
// with data.teacher_dim() > 0 the teacher rows too.
void FillBatch(const ExampleSet& data, absl::Span<const int64_t> ids,
               BatchBuffer* batch);

// The order of epoch `epoch` of `num_examples` examples: a permutation every
// worker derives identically from `seed`.
std::vector<int64_t> EpochOrder(int64_t num_examples, uint64_t seed,
                                uint64_t epoch);

class ExampleSampler {
 public:
  ExampleSampler(const ExampleSet* data, uint64_t seed);

  // Fills `batch` (batch->sequences examples) with the next examples.
  void Next(BatchBuffer* batch);

  // Examples drawn so far divided by the data size.
  double epochs() const;

 private:
  const ExampleSet* data_;
  std::mt19937_64 rng_;
  std::vector<int64_t> order_;
  std::vector<int64_t> ids_;
  size_t next_ = 0;
  int64_t drawn_ = 0;
};

}  // namespace asgd

#endif  // ASGD_WORKER_DATA_EXAMPLES_H_
