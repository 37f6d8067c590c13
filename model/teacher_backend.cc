#include "model/teacher_backend.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace asgd {
namespace {

class TeacherBackend final : public ModelBackend {
 public:
  TeacherBackend(std::unique_ptr<ModelBackend> student,
                 std::unique_ptr<ModelBackend> teacher,
                 std::vector<float> teacher_params,
                 const TeacherOptions& options)
      : student_(std::move(student)),
        teacher_(std::move(teacher)),
        teacher_params_(std::move(teacher_params)),
        options_(options),
        log_posteriors_(teacher_ == nullptr
                            ? 0
                            : static_cast<size_t>(student_->max_rows()) *
                                  student_->spec().output_dim()) {}

  absl::string_view name() const override { return student_->name(); }
  const ModelSpec& spec() const override { return student_->spec(); }
  int max_rows() const override { return student_->max_rows(); }

  absl::StatusOr<BatchResult> ComputeGradient(absl::Span<const float> params,
                                              const Batch& batch,
                                              absl::Span<float> grad) override {
    ASGD_ASSIGN_OR_RETURN(Batch taught, Taught(batch));
    return student_->ComputeGradient(params, taught, grad);
  }
  absl::Status LogPosteriors(absl::Span<const float> params,
                             const Batch& batch,
                             absl::Span<float> out) override {
    return student_->LogPosteriors(params, batch, out);
  }
  absl::Status Predict(absl::Span<const float> params, const Batch& batch,
                       absl::Span<int32_t> out) override {
    return student_->Predict(params, batch, out);
  }

  absl::Status LoadModel(absl::Span<const float> params) override {
    return student_->LoadModel(params);
  }
  absl::Status PinHostBuffer(absl::Span<const float> buffer) override {
    return student_->PinHostBuffer(buffer);
  }
  void UnpinHostBuffer(absl::Span<const float> buffer) override {
    student_->UnpinHostBuffer(buffer);
  }
  absl::StatusOr<BatchResult> AccumulateGradient(const Batch& batch) override {
    ASGD_ASSIGN_OR_RETURN(Batch taught, Taught(batch));
    return student_->AccumulateGradient(taught);
  }
  int accumulated() const override { return student_->accumulated(); }
  // The student stages the rows and labels; the teacher's posteriors of a
  // batch are computed when its gradient call comes.
  bool stages_batches() const override { return student_->stages_batches(); }
  void StageNext(const Batch& next) override { student_->StageNext(next); }
  absl::Status TakeAverage(absl::Span<float> out) override {
    return student_->TakeAverage(out);
  }
  absl::Status TakeBf16(absl::Span<uint16_t> out) override {
    return student_->TakeBf16(out);
  }
  absl::Status TakeOneBit(const OneBitPlan& plan,
                          absl::Span<char> out) override {
    return student_->TakeOneBit(plan, out);
  }
  absl::Status TakeTopK(const TopKPlan& plan,
                        std::vector<std::string>* out) override {
    return student_->TakeTopK(plan, out);
  }
  absl::Status RestoreResidual(int64_t flat_begin,
                               absl::Span<const float> values) override {
    return student_->RestoreResidual(flat_begin, values);
  }
  absl::Status ReadResidual(absl::Span<float> out) override {
    return student_->ReadResidual(out);
  }
  absl::StatusOr<std::unique_ptr<ExactCopy>> CreateExactCopy(
      int64_t count) override {
    return student_->CreateExactCopy(count);
  }
  absl::Status MirrorFromCopy(absl::Span<float> buffer, int64_t begin,
                              const ExactCopy& copy) override {
    return student_->MirrorFromCopy(buffer, begin, copy);
  }
  absl::Status DownloadMirror(absl::Span<float> buffer, int64_t begin,
                              int64_t count) override {
    return student_->DownloadMirror(buffer, begin, count);
  }
  absl::Status LoadMirroredModel(absl::Span<const float> buffer) override {
    return student_->LoadMirroredModel(buffer);
  }

 private:
  // The batch with the teacher's log-posteriors of its rows: the teacher
  // model's, or (without one) those the batch brings.
  absl::StatusOr<Batch> Taught(const Batch& batch) {
    const int64_t values = int64_t{batch.rows()} * spec().output_dim();
    if (batch.rows() > max_rows() || batch.rows() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "batch of ", batch.rows(), " rows, at most ", max_rows()));
    }
    if (teacher_ == nullptr) {
      if (static_cast<int64_t>(batch.teacher.size()) != values) {
        return absl::FailedPreconditionError(absl::StrCat(
            "teacher-student training from the data: a batch of ",
            batch.rows(), " rows with ", batch.teacher.size(),
            " teacher values (want ", values, "): the data has no teacher "
            "posteriors"));
      }
      Batch taught = batch;
      taught.teacher_weight = options_.weight;
      taught.temperature = options_.temperature;
      return taught;
    }
    const absl::Span<float> out =
        absl::MakeSpan(log_posteriors_).subspan(0, values);
    ASGD_RETURN_IF_ERROR(teacher_->LogPosteriors(teacher_params_, batch, out));
    Batch taught = batch;
    taught.teacher = out;
    taught.teacher_weight = options_.weight;
    taught.temperature = options_.temperature;
    return taught;
  }

  const std::unique_ptr<ModelBackend> student_;
  const std::unique_ptr<ModelBackend> teacher_;  // null: the batch's rows
  const std::vector<float> teacher_params_;
  const TeacherOptions options_;
  std::vector<float> log_posteriors_;  // [max_rows, output_dim()]
};

absl::Status CheckOptions(const TeacherOptions& options) {
  if (!(options.weight >= 0.0f && options.weight <= 1.0f) ||
      !(options.temperature > 0.0f && options.temperature <= 100.0f)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "teacher weight ", options.weight, " (want [0, 1]) and temperature ",
        options.temperature, " (want (0, 100])"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelBackend>> WithTeacherFromData(
    std::unique_ptr<ModelBackend> student, const TeacherOptions& options) {
  ASGD_RETURN_IF_ERROR(CheckOptions(options));
  return std::unique_ptr<ModelBackend>(
      new TeacherBackend(std::move(student), nullptr, {}, options));
}

absl::StatusOr<std::unique_ptr<ModelBackend>> WithTeacher(
    std::unique_ptr<ModelBackend> student,
    std::unique_ptr<ModelBackend> teacher, std::vector<float> teacher_params,
    const TeacherOptions& options) {
  ASGD_RETURN_IF_ERROR(CheckOptions(options));
  if (teacher == nullptr) {
    return absl::InvalidArgumentError("WithTeacher: no teacher backend");
  }
  const ModelSpec& s = student->spec();
  const ModelSpec& t = teacher->spec();
  if (t.feature_dim != s.feature_dim || t.context != s.context ||
      t.num_classes != s.num_classes || t.is_sequence() != s.is_sequence() ||
      t.output_frames != s.output_frames) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the teacher (", DescribeModel(t), ") does not fit the student (",
        DescribeModel(s), "): the input rows (feature_dim, context), the "
        "classes, the output frames and the kind (frame or sequence model) "
        "must be the same"));
  }
  if (static_cast<int64_t>(teacher_params.size()) != ModelParamCount(t)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the teacher has ", teacher_params.size(),
                     " parameters, its spec ", ModelParamCount(t)));
  }
  if (teacher->max_rows() < student->max_rows()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the teacher's backend takes ", teacher->max_rows(),
        " rows, the student's ", student->max_rows()));
  }
  return std::unique_ptr<ModelBackend>(
      new TeacherBackend(std::move(student), std::move(teacher),
                         std::move(teacher_params), options));
}

}  // namespace asgd
