// asgd_worker's teacher-student flags (defined in teacher_flags.cc):
//   --teacher_model, --teacher_posteriors, --teacher_weight,
//   --teacher_temperature
// With --teacher_model the worker's backend is wrapped by WithTeacher
// (model/teacher_backend.h): every gradient it pushes is against the
// teacher's posteriors as well as the labels. With --teacher_posteriors the
// teacher's log-posteriors are read with the Kaldi data (an scp of
// per-utterance matrices: KaldiInput::teacher_scp) and the backend is
// wrapped by WithTeacherFromData.
#ifndef ASGD_WORKER_TEACHER_FLAGS_H_
#define ASGD_WORKER_TEACHER_FLAGS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/backend.h"
#include "model/cuda/cuda_options.h"

namespace asgd {

// `student` itself without --teacher_model or --teacher_posteriors; else the
// student with the teacher (--teacher_model: a backend of the student's kind,
// "cpu" or "cuda" with `cuda`'s device and math, and rows). Unimplemented for
// a student backend without the soft-target loss (neither); the errors of
// LoadModel, CreateBackend and WithTeacher (a teacher that does not fit the
// pool's model).
absl::StatusOr<std::unique_ptr<ModelBackend>> WithTeacherFromFlags(
    std::unique_ptr<ModelBackend> student, int worker_index,
    const CudaOptions& cuda);

// --teacher_posteriors ("" without).
std::string TeacherPosteriorsFlag();

// InvalidArgument for teacher flags that do not go together or with the
// run: --teacher_model and --teacher_posteriors both, --teacher_posteriors
// without Kaldi data (`kaldi`), either in a pipeline (its stages compute
// the labels' loss only).
absl::Status CheckTeacherFlags(bool kaldi, bool pipeline);

}  // namespace asgd

#endif  // ASGD_WORKER_TEACHER_FLAGS_H_
