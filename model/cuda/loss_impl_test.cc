// The CUDA backend's soft-target pass (loss_impl.h) run on the CPU through
// HostExec, in both row orders, against the CPU backend's SoftmaxLoss
// (model/softmax_loss.h) on the same logits, teacher and labels: the
// gradient on the logits and the mean loss must agree.
#include "model/cuda/loss_impl.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "model/backend.h"
#include "model/cuda/host_exec.h"
#include "model/model_spec.h"
#include "model/softmax_loss.h"

namespace asgd {
namespace {

using cuda_ops::HostExec;

struct Case {
  int rows, c;
  float w, t;
};

std::vector<float> Random(int64_t n, std::mt19937* rng, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(*rng);
  return v;
}

// Natural-log posteriors of random logits, one row of c at a time (what a
// teacher's LogPosteriors gives), with a few classes at -inf-like values.
std::vector<float> TeacherRows(int rows, int c, std::mt19937* rng) {
  std::vector<float> z = Random(int64_t{rows} * c, rng, 3.0f);
  for (int i = 0; i < rows; ++i) {
    float* row = z.data() + int64_t{i} * c;
    if (i % 3 == 0) row[i % c] = -200.0f;  // a posterior that underflows
    double mx = row[0];
    for (int k = 1; k < c; ++k) mx = std::max<double>(mx, row[k]);
    double sum = 0;
    for (int k = 0; k < c; ++k) sum += std::exp(row[k] - mx);
    for (int k = 0; k < c; ++k) {
      row[k] = static_cast<float>(row[k] - mx - std::log(sum));
    }
  }
  return z;
}

TEST(LossImplTest, SoftTargetsMatchTheCpuLoss) {
  std::mt19937 rng(21);
  for (const Case& cs : {Case{19, 37, 0.3f, 1.0f}, Case{19, 37, 0.7f, 2.5f},
                         Case{8, 2000, 0.5f, 3.0f}, Case{5, 11, 1.0f, 1.0f},
                         Case{5, 11, 0.0f, 4.0f}}) {
    ModelSpec spec;
    spec.feature_dim = 3;
    spec.num_classes = cs.c;
    std::vector<float> logits = Random(int64_t{cs.rows} * cs.c, &rng, 2.0f);
    const std::vector<float> teacher = TeacherRows(cs.rows, cs.c, &rng);
    std::vector<int32_t> labels(cs.rows);
    int labelled = 0;
    for (int i = 0; i < cs.rows; ++i) {
      labels[i] = i % 4 == 1 ? kNoLabel : static_cast<int32_t>(rng() % cs.c);
      labelled += labels[i] != kNoLabel;
    }
    Batch batch;
    batch.sequences = cs.rows;
    batch.labels = labels;
    batch.teacher = teacher;
    batch.teacher_weight = cs.w;
    batch.temperature = cs.t;

    std::vector<float> cpu_logits = logits;
    std::vector<float> want(logits.size());
    SoftmaxLoss loss(spec);
    const BatchResult result =
        loss.Compute(batch, cpu_logits.data(), want.data());

    for (auto order : {HostExec::Order::kForward, HostExec::Order::kBackward}) {
      HostExec x(order);
      std::vector<float> scratch(int64_t{cs.rows} * 2 * cs.c);
      std::vector<float> d(logits.size(), 7.0f);  // every value overwritten
      std::vector<float> row_loss(cs.rows, 7.0f);
      ASSERT_TRUE(cuda_ops::SoftTargets(x, logits.data(), teacher.data(),
                                        labels.data(), cs.rows, cs.c, cs.w,
                                        cs.t, 1.0f / labelled, scratch.data(),
                                        d.data(), row_loss.data())
                      .ok());
      double mean = 0;
      for (int i = 0; i < cs.rows; ++i) {
        mean += row_loss[i];
        if (labels[i] == kNoLabel) {
          EXPECT_EQ(row_loss[i], 0.0f) << i;
        }
      }
      mean /= labelled;
      EXPECT_NEAR(mean, result.loss, 1e-6 * std::max(1.0, result.loss))
          << "rows " << cs.rows << " c " << cs.c << " w " << cs.w << " T "
          << cs.t;
      for (size_t e = 0; e < d.size(); ++e) {
        ASSERT_NEAR(d[e], want[e], 1e-7f + 1e-6f * std::fabs(want[e]))
            << "element " << e << " (row " << e / cs.c << ") w " << cs.w
            << " T " << cs.t;
      }
    }
  }
}

// With weight 0 the pass gives the hard-label gradient and loss, whatever the
// teacher says; with weight 1 the labels' gradient term is gone.
TEST(LossImplTest, WeightsZeroAndOneAreTheTwoLosses) {
  std::mt19937 rng(22);
  const int rows = 6, c = 9;
  const std::vector<float> logits = Random(rows * c, &rng, 1.0f);
  const std::vector<float> teacher = TeacherRows(rows, c, &rng);
  std::vector<int32_t> labels = {0, 3, 8, 1, 1, 5};
  HostExec x;
  std::vector<float> scratch(rows * 2 * c), d(rows * c), loss(rows);
  ASSERT_TRUE(cuda_ops::SoftTargets(x, logits.data(), teacher.data(),
                                    labels.data(), rows, c, 0.0f, 2.0f, 1.0f,
                                    scratch.data(), d.data(), loss.data())
                  .ok());
  for (int i = 0; i < rows; ++i) {
    std::vector<float> p(c);
    cuda_ops::SoftmaxInto(logits.data() + i * c, c, 1.0f, p.data());
    EXPECT_NEAR(loss[i], -std::log(p[labels[i]]), 1e-6);
    for (int k = 0; k < c; ++k) {
      EXPECT_NEAR(d[i * c + k], p[k] - (k == labels[i] ? 1.0f : 0.0f), 1e-7);
    }
  }
  ASSERT_TRUE(cuda_ops::SoftTargets(x, logits.data(), teacher.data(),
                                    labels.data(), rows, c, 1.0f, 2.0f, 1.0f,
                                    scratch.data(), d.data(), loss.data())
                  .ok());
  for (int i = 0; i < rows; ++i) {
    double sum = 0;
    for (int k = 0; k < c; ++k) sum += d[i * c + k];
    EXPECT_NEAR(sum, 0.0, 1e-6);  // T (pT - qT) sums to 0 over the classes
    EXPECT_GE(loss[i], -1e-6f);   // T² KL >= 0
  }
}

}  // namespace
}  // namespace asgd
