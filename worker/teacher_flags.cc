#include "worker/teacher_flags.h"

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/cpu_backend.h"
#include "model/model_file.h"
#include "model/teacher_backend.h"

ABSL_FLAG(std::string, teacher_model, "",
          "Teacher-student training: a saved model (e.g. a larger one trained "
          "before) whose posteriors the worker trains against as well as the "
          "labels. Its forward pass runs on this worker's CPU; the student "
          "needs --backend=cpu. Same input rows and classes as the pool's "
          "model.");
ABSL_FLAG(double, teacher_weight, 0.5,
          "With --teacher_model: the share of the soft-target loss, in "
          "[0, 1] (the labels' cross-entropy has the rest).");
ABSL_FLAG(double, teacher_temperature, 2.0,
          "With --teacher_model: the temperature T of the soft targets "
          "(softmax(z / T) of teacher and student; that loss is scaled by "
          "T²), in (0, 100].");

namespace asgd {

absl::StatusOr<std::unique_ptr<ModelBackend>> WithTeacherFromFlags(
    std::unique_ptr<ModelBackend> student, int worker_index) {
  const std::string path = absl::GetFlag(FLAGS_teacher_model);
  if (path.empty()) return student;
  if (student->name() != "cpu") {
    return absl::UnimplementedError(absl::StrCat(
        "--teacher_model: teacher-student training runs on the CPU backend "
        "(--backend=cpu), not ", student->name()));
  }
  ASGD_ASSIGN_OR_RETURN(SavedModel teacher, LoadModel(path));
  ASGD_ASSIGN_OR_RETURN(std::unique_ptr<ModelBackend> teacher_backend,
                        CreateCpuBackend(teacher.spec, student->max_rows()));
  TeacherOptions options;
  options.weight = static_cast<float>(absl::GetFlag(FLAGS_teacher_weight));
  options.temperature =
      static_cast<float>(absl::GetFlag(FLAGS_teacher_temperature));
  std::printf("worker %d: teacher %s: %s, %lld params; soft-target weight "
              "%g, temperature %g\n",
              worker_index, path.c_str(), DescribeModel(teacher.spec).c_str(),
              static_cast<long long>(teacher.params.size()), options.weight,
              options.temperature);
  std::fflush(stdout);
  return WithTeacher(std::move(student), std::move(teacher_backend),
                     std::move(teacher.params), options);
}

}  // namespace asgd
