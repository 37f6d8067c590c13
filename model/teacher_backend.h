// Teacher-student training as a backend: WithTeacher wraps the student's
// backend so that every gradient it computes is against a teacher's
// posteriors as well as the labels (Batch::teacher, the soft-target loss
// of model/backend.h). Before each ComputeGradient or AccumulateGradient it
// runs the teacher's forward pass on the same rows (its own backend and
// weights, fixed), then hands the student's backend the batch with the
// teacher's log-posteriors. Every other call goes to the student's backend
// unchanged, so the trainer, the pushes and the resident model do not know
// a teacher is there. WithTeacherFromData is the same wrapper without a
// teacher model: the batches bring the teacher's log-posteriors (read from
// an archive with the data) and it only sets their weight and temperature.
//
//   TeacherOptions t;  // weight 0.5, temperature 2
//   ASGD_ASSIGN_OR_RETURN(backend, WithTeacher(std::move(backend),
//       std::move(teacher_backend), teacher.params, t));
//
// The teacher must read the same input rows (feature_dim, context) and give
// the same classes as the student; its layers are its own (a larger DNN, an
// LSTM for a DNN student, ...), but a sequence model can teach only a
// sequence model and a frame model a frame model (the rows must mean the
// same thing). The student's backend must implement the soft-target loss
// (the CPU and CUDA backends do; a CUDA plugin older than that refuses such
// batches with Unimplemented).
//
// Thread-safety: as the wrapped backends (one thread at a time).
#ifndef ASGD_MODEL_TEACHER_BACKEND_H_
#define ASGD_MODEL_TEACHER_BACKEND_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "model/backend.h"

namespace asgd {

struct TeacherOptions {
  float weight = 0.5f;       // share of the soft-target loss, in [0, 1]
  float temperature = 2.0f;  // T, in (0, 100]
};

// InvalidArgument for options out of range, teacher params that do not
// match its spec, or a teacher whose inputs, classes or kind (frame or
// sequence model) differ from the student's, or whose backend takes fewer
// rows than the student's.
absl::StatusOr<std::unique_ptr<ModelBackend>> WithTeacher(
    std::unique_ptr<ModelBackend> student,
    std::unique_ptr<ModelBackend> teacher, std::vector<float> teacher_params,
    const TeacherOptions& options);

// Teacher-student training from the data: the teacher's log-posteriors come
// with every gradient batch (Batch::teacher, e.g. read from an archive with
// the features: worker/data/kaldi_data.h); this wrapper gives them the
// options' weight and temperature. InvalidArgument for options out of
// range; a gradient batch without rows × output_dim() teacher values is
// FailedPrecondition.
absl::StatusOr<std::unique_ptr<ModelBackend>> WithTeacherFromData(
    std::unique_ptr<ModelBackend> student, const TeacherOptions& options);

}  // namespace asgd

#endif  // ASGD_MODEL_TEACHER_BACKEND_H_
