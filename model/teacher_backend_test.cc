// Teacher-student training: the soft-target loss of the CPU backend against
// finite differences and its limits, and WithTeacher's and
// WithTeacherFromData's wrapping.
#include "model/teacher_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/bf16_bits.h"
#include "compression/top_k_plan.h"
#include "gtest/gtest.h"
#include "model/backend.h"
#include "model/cpu_backend.h"
#include "model/loss_gradient_check.h"
#include "model/model_spec.h"

namespace asgd {
namespace {

ModelSpec Dnn(int hidden, int classes = 6) {
  ModelSpec spec;
  spec.feature_dim = 5;
  spec.context = 1;
  spec.layers = {LayerSpec::Dense(hidden, Activation::kTanh)};
  spec.num_classes = classes;
  return spec;
}

struct Data {
  int rows = 0;
  std::vector<float> inputs;
  std::vector<int32_t> labels;
  std::vector<float> teacher;  // log-posteriors
  Batch batch(float weight = 0.0f, float temperature = 1.0f,
              bool taught = false) const {
    Batch b{rows, 1, inputs, labels};
    if (taught) {
      b.teacher = teacher;
      b.teacher_weight = weight;
      b.temperature = temperature;
    }
    return b;
  }
};

Data RandomData(const ModelSpec& spec, int rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  Data d;
  d.rows = rows;
  d.inputs.resize(int64_t{rows} * spec.input_dim());
  for (float& x : d.inputs) x = n(rng);
  for (int i = 0; i < rows; ++i) d.labels.push_back(i % spec.num_classes);
  d.labels[1] = kNoLabel;
  const int c = spec.num_classes;
  d.teacher.resize(int64_t{rows} * c);
  for (int i = 0; i < rows; ++i) {  // log-softmax of random logits
    float* row = d.teacher.data() + int64_t{i} * c;
    double sum = 0;
    for (int k = 0; k < c; ++k) sum += std::exp(row[k] = 2 * n(rng));
    for (int k = 0; k < c; ++k) row[k] -= static_cast<float>(std::log(sum));
  }
  return d;
}

std::vector<float> Params(const ModelSpec& spec, uint64_t seed) {
  std::vector<float> p = InitialParams(spec, seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-0.2f, 0.2f);
  for (float& x : p) x += u(rng);
  return p;
}

absl::StatusOr<BatchResult> Gradient(ModelBackend& b,
                                     const std::vector<float>& params,
                                     const Batch& batch,
                                     std::vector<float>* grad) {
  grad->assign(params.size(), 0.0f);
  return b.ComputeGradient(params, batch, absl::MakeSpan(*grad));
}

TEST(TeacherTest, SoftTargetGradientMatchesFiniteDifferences) {
  const ModelSpec spec = Dnn(7);
  auto backend = CreateCpuBackend(spec, 16);
  ASSERT_TRUE(backend.ok());
  const Data d = RandomData(spec, 12, 1);
  const std::vector<float> params = Params(spec, 2);
  for (auto [w, t] : {std::pair<float, float>{0.3f, 2.0f}, {1.0f, 1.0f},
                      {0.7f, 0.5f}}) {
    SCOPED_TRACE(testing::Message() << "weight " << w << " temperature " << t);
    const Batch batch = d.batch(w, t, true);
    std::vector<float> grad;
    ASSERT_TRUE(Gradient(**backend, params, batch, &grad).ok());
    const LossGradientReport check =
        CheckLossGradient(**backend, params, batch, grad);
    EXPECT_EQ(check.checked, static_cast<int>(params.size()));
    EXPECT_EQ(check.failures, 0) << check.first_failure;
  }
}

TEST(TeacherTest, WeightZeroIsTheLabelsAlone) {
  const ModelSpec spec = Dnn(7);
  auto backend = CreateCpuBackend(spec, 16);
  ASSERT_TRUE(backend.ok());
  const Data d = RandomData(spec, 12, 3);
  const std::vector<float> params = Params(spec, 4);
  std::vector<float> plain, taught;
  auto a = Gradient(**backend, params, d.batch(), &plain);
  auto b = Gradient(**backend, params, d.batch(0.0f, 3.0f, true), &taught);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(plain, taught);
  EXPECT_EQ(a->loss, b->loss);
  EXPECT_EQ(a->correct, b->correct);
}

TEST(TeacherTest, AStudentTaughtByItselfAloneHasNothingToLearn) {
  const ModelSpec spec = Dnn(7);
  auto backend = CreateCpuBackend(spec, 16);
  ASSERT_TRUE(backend.ok());
  Data d = RandomData(spec, 12, 5);
  const std::vector<float> params = Params(spec, 6);
  ASSERT_TRUE((*backend)
                  ->LogPosteriors(params, d.batch(), absl::MakeSpan(d.teacher))
                  .ok());
  std::vector<float> grad;
  auto r = Gradient(**backend, params, d.batch(1.0f, 2.0f, true), &grad);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->loss, 0.0, 1e-6);
  for (float g : grad) ASSERT_NEAR(g, 0.0f, 1e-6f);
}

TEST(TeacherTest, WithTeacherHandsTheStudentTheTeachersPosteriors) {
  const ModelSpec student_spec = Dnn(4);
  const ModelSpec teacher_spec = Dnn(9);
  const Data d = RandomData(student_spec, 12, 7);
  const std::vector<float> student = Params(student_spec, 8);
  const std::vector<float> teacher = Params(teacher_spec, 9);
  auto reference = CreateCpuBackend(student_spec, 16);
  auto teacher_alone = CreateCpuBackend(teacher_spec, 16);
  ASSERT_TRUE(reference.ok() && teacher_alone.ok());
  Data want = d;
  ASSERT_TRUE((*teacher_alone)
                  ->LogPosteriors(teacher, d.batch(), absl::MakeSpan(want.teacher))
                  .ok());
  std::vector<float> want_grad;
  auto want_result =
      Gradient(**reference, student, want.batch(0.4f, 2.0f, true), &want_grad);
  ASSERT_TRUE(want_result.ok());

  TeacherOptions o;
  o.weight = 0.4f;
  o.temperature = 2.0f;
  auto wrapped = WithTeacher(*CreateCpuBackend(student_spec, 16),
                             *CreateCpuBackend(teacher_spec, 16), teacher, o);
  ASSERT_TRUE(wrapped.ok()) << wrapped.status();
  EXPECT_EQ((*wrapped)->name(), "cpu");
  std::vector<float> grad;
  auto result = Gradient(**wrapped, student, d.batch(), &grad);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(grad, want_grad);
  EXPECT_EQ(result->loss, want_result->loss);
  // The resident path: the same gradient, averaged over one minibatch.
  ASSERT_TRUE((*wrapped)->LoadModel(student).ok());
  ASSERT_TRUE((*wrapped)->AccumulateGradient(d.batch()).ok());
  EXPECT_EQ((*wrapped)->accumulated(), 1);
  std::vector<float> average(student.size());
  ASSERT_TRUE((*wrapped)->TakeAverage(absl::MakeSpan(average)).ok());
  EXPECT_EQ(average, want_grad);
  // Every encoding of the sum is the student's: bfloat16 and top-k (with
  // its residual) of the same gradient.
  ASSERT_TRUE((*wrapped)->AccumulateGradient(d.batch()).ok());
  std::vector<uint16_t> bf16(student.size());
  ASSERT_TRUE((*wrapped)->TakeBf16(absl::MakeSpan(bf16)).ok());
  for (size_t i = 0; i < bf16.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &want_grad[i], 4);
    ASSERT_EQ(bf16[i], Bf16FromFloatBits(bits)) << i;
  }
  ASSERT_TRUE((*wrapped)->AccumulateGradient(d.batch()).ok());
  TopKPlan plan;
  plan.chunks = {{0, static_cast<int64_t>(student.size()), 5}};
  std::vector<std::string> got_chunks, want_chunks;
  ASSERT_TRUE((*wrapped)->TakeTopK(plan, &got_chunks).ok());
  std::vector<float> want_residual(student.size(), 0.0f);
  ASSERT_TRUE(EncodeTopKPlan(plan, want_grad, 1.0f,
                             absl::MakeSpan(want_residual), &want_chunks)
                  .ok());
  EXPECT_EQ(got_chunks, want_chunks);
  std::vector<float> residual(student.size());
  ASSERT_TRUE((*wrapped)->ReadResidual(absl::MakeSpan(residual)).ok());
  EXPECT_EQ(residual, want_residual);
}

// From the data: the batch brings the teacher's log-posteriors (as read
// from an archive); the wrapper gives them the weight and the temperature,
// and the gradient is exactly that of the batch taught by hand.
TEST(TeacherTest, WithTeacherFromDataUsesTheBatchsTeacherRows) {
  const ModelSpec spec = Dnn(4);
  const Data d = RandomData(spec, 12, 3);
  const std::vector<float> params = Params(spec, 4);
  auto reference = CreateCpuBackend(spec, 16);
  ASSERT_TRUE(reference.ok());
  std::vector<float> want_grad;
  auto want = Gradient(**reference, params, d.batch(0.3f, 1.5f, true),
                       &want_grad);
  ASSERT_TRUE(want.ok());

  TeacherOptions o;
  o.weight = 0.3f;
  o.temperature = 1.5f;
  auto wrapped = WithTeacherFromData(*CreateCpuBackend(spec, 16), o);
  ASSERT_TRUE(wrapped.ok()) << wrapped.status();
  Batch carried = d.batch();  // teacher rows, no weight or temperature
  carried.teacher = d.teacher;
  std::vector<float> grad;
  auto result = Gradient(**wrapped, params, carried, &grad);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(grad, want_grad);
  EXPECT_EQ(result->loss, want->loss);
  ASSERT_TRUE((*wrapped)->LoadModel(params).ok());
  ASSERT_TRUE((*wrapped)->AccumulateGradient(carried).ok());
  std::vector<float> average(params.size());
  ASSERT_TRUE((*wrapped)->TakeAverage(absl::MakeSpan(average)).ok());
  EXPECT_EQ(average, want_grad);

  // A batch without its teacher rows, or with too few: refused, nothing
  // computed; evaluation needs none.
  EXPECT_EQ(Gradient(**wrapped, params, d.batch(), &grad).status().code(),
            absl::StatusCode::kFailedPrecondition);
  Batch short_rows = carried;
  short_rows.teacher = absl::MakeConstSpan(d.teacher).subspan(1);
  EXPECT_EQ(Gradient(**wrapped, params, short_rows, &grad).status().code(),
            absl::StatusCode::kFailedPrecondition);
  std::vector<float> logp(d.teacher.size());
  EXPECT_TRUE(
      (*wrapped)->LogPosteriors(params, d.batch(), absl::MakeSpan(logp)).ok());
  EXPECT_EQ(WithTeacherFromData(*CreateCpuBackend(spec, 16), {1.5f, 2.0f})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TeacherTest, RefusesWhatDoesNotFit) {
  const ModelSpec spec = Dnn(4);
  auto make = [&](const ModelSpec& t, TeacherOptions o, int64_t drop = 0) {
    std::vector<float> params = InitialParams(t, 1);
    params.resize(params.size() - drop);
    return WithTeacher(*CreateCpuBackend(spec, 16), *CreateCpuBackend(t, 16),
                       params, o)
        .status()
        .code();
  };
  const auto kBad = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(make(Dnn(9, 7), {}), kBad);  // other classes
  ModelSpec wider = Dnn(9);
  wider.context = 2;
  EXPECT_EQ(make(wider, {}), kBad);  // other input rows
  ModelSpec lstm = Dnn(9);
  lstm.context = 1;
  LstmLayerSpec l;
  l.cells = 3;
  lstm.layers = {LayerSpec::Lstm(l)};
  EXPECT_EQ(make(lstm, {}), kBad);  // a sequence model
  EXPECT_EQ(make(Dnn(9), {1.5f, 2.0f}), kBad);
  EXPECT_EQ(make(Dnn(9), {0.5f, 0.0f}), kBad);
  EXPECT_EQ(make(Dnn(9), {}, 1), kBad);

  // The backend's own checks of a taught batch.
  auto backend = CreateCpuBackend(spec, 16);
  const Data d = RandomData(spec, 12, 1);
  const std::vector<float> params = Params(spec, 2);
  std::vector<float> grad;
  Batch b = d.batch(0.5f, 2.0f, true);
  b.teacher = absl::MakeConstSpan(d.teacher).subspan(1);
  EXPECT_EQ(Gradient(**backend, params, b, &grad).status().code(), kBad);
  Data nan = d;
  nan.teacher[3] = std::nanf("");
  EXPECT_EQ(Gradient(**backend, params, nan.batch(0.5f, 2.0f, true), &grad)
                .status()
                .code(),
            kBad);
  EXPECT_EQ(Gradient(**backend, params, d.batch(-0.1f, 2.0f, true), &grad)
                .status()
                .code(),
            kBad);
}

}  // namespace
}  // namespace asgd
