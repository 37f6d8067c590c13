#include "worker/teacher_flags.h"

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/backend_factory.h"
#include "model/model_file.h"
#include "model/teacher_backend.h"

ABSL_FLAG(std::string, teacher_model, "",
          "Teacher-student training: a saved model (e.g. a larger one trained "
          "before) whose posteriors the worker trains against as well as the "
          "labels. Its forward pass runs on this worker's backend (CPU or "
          "CUDA, as the student's). Same input rows and classes as the "
          "pool's model.");
ABSL_FLAG(std::string, teacher_posteriors, "",
          "Teacher-student training from an archive: an scp of the teacher's "
          "log-posteriors per training utterance (frames x classes, e.g. "
          "asgd_forward --log_posteriors --out_scp of a larger model over "
          "the same --kaldi_data), read with the features, so that no "
          "teacher runs on the worker. An utterance without them, or with "
          "rows that are not log-distributions, is bad data (missing_teacher, "
          "bad_teacher). With --kaldi_data; not with --teacher_model, nor "
          "for multi-frame models.");
ABSL_FLAG(double, teacher_weight, 0.5,
          "With --teacher_model or --teacher_posteriors: the share of the "
          "soft-target loss, in [0, 1] (the labels' cross-entropy has the "
          "rest).");
ABSL_FLAG(double, teacher_temperature, 2.0,
          "With --teacher_model or --teacher_posteriors: the temperature T of "
          "the soft targets (softmax(z / T) of teacher and student; that loss "
          "is scaled by T²), in (0, 100].");

namespace asgd {

std::string TeacherPosteriorsFlag() {
  return absl::GetFlag(FLAGS_teacher_posteriors);
}

absl::Status CheckTeacherFlags(bool kaldi, bool pipeline) {
  const bool model = !absl::GetFlag(FLAGS_teacher_model).empty();
  const bool archive = !TeacherPosteriorsFlag().empty();
  if (model && archive) {
    return absl::InvalidArgumentError(
        "give --teacher_model (the teacher runs on the worker) or "
        "--teacher_posteriors (its posteriors read from an archive), not "
        "both");
  }
  if (archive && !kaldi) {
    return absl::InvalidArgumentError(
        "--teacher_posteriors reads with the Kaldi data: it needs "
        "--kaldi_data (the built-in corpus has no archive: use "
        "--teacher_model)");
  }
  if ((model || archive) && pipeline) {
    return absl::InvalidArgumentError(
        "--mode=pipeline trains on the labels alone: its stages compute no "
        "soft-target loss (drop --teacher_model / --teacher_posteriors)");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ModelBackend>> WithTeacherFromFlags(
    std::unique_ptr<ModelBackend> student, int worker_index,
    const CudaOptions& cuda) {
  const std::string path = absl::GetFlag(FLAGS_teacher_model);
  const std::string archive = TeacherPosteriorsFlag();
  if (path.empty() && archive.empty()) return student;
  const char* flag = path.empty() ? "--teacher_posteriors" : "--teacher_model";
  const std::string backend(student->name());
  if (backend != "cpu" && backend != "cuda") {
    return absl::UnimplementedError(absl::StrCat(
        flag, ": teacher-student training runs on the CPU and CUDA backends, "
        "not ", backend));
  }
  TeacherOptions options;
  options.weight = static_cast<float>(absl::GetFlag(FLAGS_teacher_weight));
  options.temperature =
      static_cast<float>(absl::GetFlag(FLAGS_teacher_temperature));
  if (path.empty()) {
    if (student->spec().output_frames > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--teacher_posteriors: the archive holds one distribution per "
          "frame, the model has ", student->spec().output_frames,
          " output frames per row"));
    }
    std::printf("worker %d: teacher posteriors from %s; soft-target weight "
                "%g, temperature %g\n",
                worker_index, archive.c_str(), options.weight,
                options.temperature);
    std::fflush(stdout);
    return WithTeacherFromData(std::move(student), options);
  }
  ASGD_ASSIGN_OR_RETURN(SavedModel teacher, LoadModel(path));
  // The teacher on the student's backend (and device).
  ASGD_ASSIGN_OR_RETURN(std::unique_ptr<ModelBackend> teacher_backend,
                        CreateBackend(backend, teacher.spec,
                                      student->max_rows(), nullptr, cuda));
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
