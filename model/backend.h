// ModelBackend: forward and backward of a whole model (model/model_spec.h)
// behind one interface, so that training loops do not care what the model
// is or where its math runs. CreateCpuBackend() (model/cpu_backend.h) runs
// the layers of model/layers/ with OpenBLAS; the CUDA plugin
// (model/cuda/) implements the same interface on a GPU.
//
// Parameters and gradients are flat float vectors in ModelLayout order
// (ModelTensors(spec)). A Batch is `sequences` × `steps` input rows,
// time-major (row t * sequences + b is step t of sequence b; frame models
// use steps = 1), each input_dim() floats, with one label per row: a class
// id, or kNoLabel for rows that only give context (the extra frames around
// a recurrent model's chunk): they are computed but neither scored nor
// trained on. A multi-frame model (output_frames = k > 1) has k labels per
// row, row i's head j at labels[i * k + j] (kNoLabel past its utterance's
// end), and its outputs likewise: k predictions, k × num_classes
// log-posteriors per row; the loss is the mean over every labelled head.
//
//   auto backend = CreateCpuBackend(spec, /*max_rows=*/256);
//   Batch batch{sequences, steps, inputs, labels};
//   auto r = (*backend)->ComputeGradient(params, batch, grad);
//   // r->loss: mean cross-entropy over labelled rows;
//   // grad: d(mean loss)/d(params)
//
// Training where the model lives. A backend also holds a model copy and a
// gradient sum of its own (the resident model): LoadModel once per model,
// then AccumulateGradient per minibatch, and TakeAverage, TakeBf16 or
// TakeOneBit per push. The CUDA backend keeps both, and the 1-bit
// error-feedback residual, in device memory, so that a step moves only its
// minibatch and a push only what it sends; the default implementation here
// keeps them in host memory and computes through ComputeGradient (the CPU
// backend, test fakes).
//
//   RETURN_IF_ERROR(backend->LoadModel(pulled));        // after each pull
//   ASSIGN_OR_RETURN(BatchResult r, backend->AccumulateGradient(batch));
//   if (backend->accumulated() == push_every)
//     RETURN_IF_ERROR(backend->TakeOneBit(plan, bytes));  // then push bytes
//
// Thread-safety: a backend owns scratch buffers; use one per thread.
#ifndef ASGD_MODEL_BACKEND_H_
#define ASGD_MODEL_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compression/one_bit_plan.h"
#include "compression/top_k_plan.h"
#include "model/exact_copy.h"
#include "model/model_spec.h"

namespace asgd {

// The label of a row that is not scored.
inline constexpr int32_t kNoLabel = -1;

struct Batch {
  int sequences = 0;
  int steps = 1;
  absl::Span<const float> inputs;   // [sequences * steps, input_dim]
  absl::Span<const int32_t> labels;  // [sequences * steps * output_frames]
  // Teacher-student training (ComputeGradient, AccumulateGradient): a
  // teacher's log-posteriors of every row ([rows, output_dim()]); empty:
  // the labels alone. With w = teacher_weight and T = temperature, the loss
  // of a labelled row is
  //   (1 - w) * -log p(label) + w * T² * KL(q_T || p_T),
  // q_T = softmax(teacher / T), p_T = softmax(logits / T), whose gradient
  // on the logits is (1 - w) (p - onehot) + w T (p_T - q_T); unlabelled
  // rows take no part, as without a teacher.
  absl::Span<const float> teacher;
  float teacher_weight = 0.0f;  // in [0, 1]
  float temperature = 1.0f;     // in (0, 100]
  int rows() const { return sequences * steps; }
};

struct BatchResult {
  double loss = 0;   // mean cross-entropy over labelled rows (nats)
  int correct = 0;   // labelled rows whose argmax equals the label
  int labelled = 0;  // rows with a label
  // AccumulateGradient: false when the gradient had a NaN or Inf (it was
  // not added to the sum).
  bool gradient_finite = true;
};

struct ResidentState;  // the default implementation's host buffers
struct HostMirrors;    // its mirrors (MirrorFromCopy)

class ModelBackend {
 public:
  ModelBackend();
  virtual ~ModelBackend();

  virtual absl::string_view name() const = 0;
  virtual const ModelSpec& spec() const = 0;
  // The largest batch (sequences * steps rows) a call may pass.
  virtual int max_rows() const = 0;

  // Gradient of the batch's mean cross-entropy over its labelled rows with
  // respect to every parameter, written to `grad` (same size as `params`);
  // all zero when no row is labelled. InvalidArgument on size mismatches, a
  // batch larger than max_rows(), steps > 1 for a frame model, or labels
  // outside [0, num_classes) other than kNoLabel.
  virtual absl::StatusOr<BatchResult> ComputeGradient(
      absl::Span<const float> params, const Batch& batch,
      absl::Span<float> grad) = 0;

  // Log-posteriors (natural log of the softmax) of every row, written to
  // `out` ([rows, num_classes]); labels are not read. Same errors as above.
  virtual absl::Status LogPosteriors(absl::Span<const float> params,
                                     const Batch& batch,
                                     absl::Span<float> out) = 0;

  // Argmax class of every row, written to `out` ([rows]); labels are not
  // read. Same errors as above.
  virtual absl::Status Predict(absl::Span<const float> params,
                               const Batch& batch,
                               absl::Span<int32_t> out) = 0;

  // ---- The resident model (see the file comment) ----

  // The resident model is `params` from now on (a copy). InvalidArgument
  // for a size other than the model's.
  virtual absl::Status LoadModel(absl::Span<const float> params);

  // Host memory of the model's size that the caller hands to LoadModel again
  // and again (the worker's model buffers): the CUDA backend page-locks it,
  // so that LoadModel of exactly that span copies it to the device at the
  // link's speed, without a pass through a staging buffer. The memory must
  // stay allocated until UnpinHostBuffer (or the backend's end). The CUDA
  // backend's errors when the system refuses to lock it (LoadModel then
  // stages it as any other memory); the default does nothing.
  virtual absl::Status PinHostBuffer(absl::Span<const float> buffer);
  // Undoes PinHostBuffer; nothing for a span that is not pinned.
  virtual void UnpinHostBuffer(absl::Span<const float> buffer);

  // Adds the gradient of `batch` at the resident model to the sum, unless
  // it has a NaN or Inf (then result.gradient_finite is false and the sum
  // is unchanged). FailedPrecondition before the first LoadModel; otherwise
  // the errors of ComputeGradient.
  virtual absl::StatusOr<BatchResult> AccumulateGradient(const Batch& batch);

  // Minibatches in the sum since it was last taken.
  virtual int accumulated() const;

  // ---- The next minibatch, moved while this one computes ----

  // True for a backend that uses StageNext (the CUDA backend); a training
  // loop then draws its minibatches one ahead and announces each.
  virtual bool stages_batches() const;

  // Announces the batch a coming gradient call (AccumulateGradient or
  // ComputeGradient) will most likely be given, usually the one after next:
  // a staging backend copies it to where it computes during its next
  // gradient call, while that call's own minibatch computes. A later call given
  // a batch with the same spans (the same memory and sizes, same sequences and
  // steps) reads the staged copy; any other batch is moved as without
  // StageNext, so a wrong guess costs only the copy. `next`'s memory must stay
  // allocated and unchanged until the gradient call that reads it returns (the
  // caller owns it: a staged copy is not a snapshot the caller may overwrite).
  // Checks nothing (the gradient call checks the batch); the default does
  // nothing.
  virtual void StageNext(const Batch& next);

  // out = sum * (1 / accumulated()) (each element rounded once; zeros for
  // an empty sum), and the sum is cleared. InvalidArgument for a size other
  // than the model's.
  virtual absl::Status TakeAverage(absl::Span<float> out);

  // The average as TakeAverage computes it, each element rounded to
  // bfloat16 as the wire rounds (common/bf16_bits.h), into `out`, and the
  // sum is cleared: a bfloat16 push without the float32 average crossing
  // to the host (the CUDA backend converts on the device and downloads half
  // the bytes). InvalidArgument for a size other than the model's.
  virtual absl::Status TakeBf16(absl::Span<uint16_t> out);

  // The average as TakeAverage computes it, plus the 1-bit residual, encoded
  // chunk by chunk as compression/one_bit_plan.h's EncodeOneBitPlan does
  // (the reference): `out` (plan.total_bytes) receives every chunk's
  // grad_codec bytes, the residual keeps what the encoding lost, and the sum
  // is cleared. The residual starts at zero. InvalidArgument for a plan
  // that does not fit the model or a wrong `out` size (nothing changes), and
  // for a NaN or Inf in an encoded value (the sum is cleared, the residual
  // and `out` are not written). A device backend may compute the groups'
  // means in another order than the reference: bits are identical, means
  // within a rounding of float32.
  virtual absl::Status TakeOneBit(const OneBitPlan& plan, absl::Span<char> out);

  // The average as TakeAverage computes it, plus the residual (the one
  // TakeOneBit keeps), top-k encoded chunk by chunk as
  // compression/top_k_plan.h's EncodeTopKPlan does (the reference): `out`
  // receives every chunk's grad_codec bytes, one string per chunk, the
  // residual keeps what was not sent, and the sum is cleared. The CUDA
  // backend selects on the device and downloads only the entries (8 bytes
  // each), bit for bit the reference's. InvalidArgument for a plan that
  // does not fit the model (nothing changes), and for a NaN or Inf in an
  // encoded value (the sum is cleared, the residual and `out` are not
  // written).
  virtual absl::Status TakeTopK(const TopKPlan& plan,
                                std::vector<std::string>* out);

  // residual[flat_begin + i] += values[i]: what a push that was not applied
  // carried goes back into the residual. InvalidArgument outside the model.
  virtual absl::Status RestoreResidual(int64_t flat_begin,
                                       absl::Span<const float> values);

  // The residual (model-sized), for checks and tests.
  virtual absl::Status ReadResidual(absl::Span<float> out);

  // ---- Exact copies where the model lives (model/exact_copy.h) ----

  // A copy of `count` floats (zeros) that delta pulls replay on where this
  // backend computes: the CUDA backend's is in its device's memory, with a
  // stream of its own. Unimplemented by default (the CPU backend): the
  // client keeps its copies in host memory. May be called from any thread;
  // the copy is independent of the backend's other state (its own memory
  // and stream) and may outlive it.
  virtual absl::StatusOr<std::unique_ptr<ExactCopy>> CreateExactCopy(
      int64_t count);

  // A slice of a pulled model straight from an exact copy (one the backend
  // made): `copy` holds [begin, begin + copy.size()) of the model pulled
  // into `buffer` (model-sized host memory: the worker's model buffers).
  // Its values are kept in the backend's mirror of `buffer` (device memory
  // for the CUDA backend, which copies them there device to device), so
  // that LoadMirroredModel(buffer) makes them the resident model without
  // reading `buffer`. `buffer` itself is not written: DownloadMirror
  // brings the values down when the host needs them (an evaluation), so a
  // model that only trains never crosses PCIe. The backend keeps one
  // model-sized mirror per buffer for its life: pass the same few buffers
  // (the worker's two). May be called from any thread, for disjoint ranges
  // of one buffer concurrently.
  // InvalidArgument for a range outside the model, a buffer of another
  // size, or a copy the backend cannot read (the CUDA backend: not one of
  // its device copies); the copy's errors.
  virtual absl::Status MirrorFromCopy(absl::Span<float> buffer, int64_t begin,
                                      const ExactCopy& copy);

  // buffer[begin, begin + count) = the same range of the mirror of
  // `buffer`: what the last MirrorFromCopy of that range left there. Not
  // while a MirrorFromCopy of that range runs. InvalidArgument for a range
  // outside the model or a buffer of another size; FailedPrecondition for a
  // buffer that has no mirror.
  virtual absl::Status DownloadMirror(absl::Span<float> buffer, int64_t begin,
                                      int64_t count);

  // As LoadModel(buffer), from the mirror of `buffer`: the caller
  // guarantees that every element of the mirror was written by
  // MirrorFromCopy since `buffer` was last written otherwise (a
  // MirroredPullSink, worker/ps/mirrored_pull_sink.h, knows). Not while a
  // MirrorFromCopy of that buffer runs. FailedPrecondition for a buffer that
  // has no mirror.
  virtual absl::Status LoadMirroredModel(absl::Span<const float> buffer);

 private:
  absl::StatusOr<ResidentState*> State();
  std::unique_ptr<ResidentState> resident_;
  std::unique_ptr<HostMirrors> mirrors_;
};

// The resident model's argument checks, shared by its implementations so
// that each gives the same InvalidArgument for the same mistake: a span of
// `size` values where the model's `num_params` are wanted (naming `call`);
// a 1-bit plan that does not fit the model or an output of another size
// than its bytes; a residual range outside the model; a mirrored range
// outside the model.
absl::Status CheckModelSized(absl::string_view call, size_t size,
                             int64_t num_params);
absl::Status CheckOneBitCall(const OneBitPlan& plan, int64_t num_params,
                             size_t out_bytes);
absl::Status CheckResidualRange(int64_t begin, size_t count,
                                int64_t num_params);
// MirrorFromCopy's and DownloadMirror's (naming `call`): a buffer of the
// model's size, [begin, begin + count) inside the model.
absl::Status CheckMirrorCall(absl::string_view call, size_t buffer_size,
                             int64_t begin, int64_t count, int64_t num_params);

// Sets the number of OpenBLAS threads for the process (1 is best when
// several workers share a machine).
void SetBlasThreads(int threads);

}  // namespace asgd

#endif  // ASGD_MODEL_BACKEND_H_
