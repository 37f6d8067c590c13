// asgd_worker's teacher-student flags (defined in teacher_flags.cc):
//   --teacher_model, --teacher_weight, --teacher_temperature
// With --teacher_model the worker's backend is wrapped by WithTeacher
// (model/teacher_backend.h): every gradient it pushes is against the
// teacher's posteriors as well as the labels.
#ifndef ASGD_WORKER_TEACHER_FLAGS_H_
#define ASGD_WORKER_TEACHER_FLAGS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "model/backend.h"

namespace asgd {

// `student` itself without --teacher_model; else the student with the
// teacher (a CPU backend of the student's rows). Unimplemented for a
// student backend without the soft-target loss (not "cpu"); the errors of
// LoadModel and WithTeacher (a teacher that does not fit the pool's model).
absl::StatusOr<std::unique_ptr<ModelBackend>> WithTeacherFromFlags(
    std::unique_ptr<ModelBackend> student, int worker_index);

}  // namespace asgd

#endif  // ASGD_WORKER_TEACHER_FLAGS_H_
