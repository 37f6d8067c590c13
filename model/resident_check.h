// The check of a backend's resident model (model/backend.h LoadModel ..
// ReadResidual) against the host reference, shared by the CPU test
// (resident_test.cc: the default implementation) and the GPU test
// (model/cuda/cuda_resident_test.cc: the CUDA backend's device kernels).
//
// ExpectResidentMatches loads `params` into `backend`, then:
//  1. accumulates `batches` and takes their average; it must equal the mean
//     of `reference`'s ComputeGradient on the same batches (bit for bit when
//     `exact`, else within `tolerance` of the largest |value|);
//  1b. accumulates them again and takes them as bfloat16 (TakeBf16): the
//     wire's rounding of step 1's average (bit for bit when `exact`);
//  2. twice: accumulates the same batches again and takes them 1-bit by
//     `plan`: the bytes must be EncodeOneBitPlan's over the average of step
//     1 with the residual the reference kept (bits identical; means equal
//     when `exact`, else within one float32 unit), and the residual
//     likewise; the second round starts from a non-zero residual;
//  3. RestoreResidual adds to the residual what it is given.
// ExpectTopKMatches checks TakeTopK exactly, whatever the backend's
// gradients: with nothing accumulated, a = the residual, which
// RestoreResidual sets to values of every kind (ties among them); two
// rounds of VariedTopKPlan must give EncodeTopKPlan's bytes and residual
// bit for bit.
// The batches' gradients must be the same each time they are accumulated
// (a deterministic backend).
//
// Thread-safety: test code; one thread.
#ifndef ASGD_MODEL_RESIDENT_CHECK_H_
#define ASGD_MODEL_RESIDENT_CHECK_H_

#include <cstdint>
#include <vector>

#include "compression/one_bit_plan.h"
#include "compression/top_k_plan.h"
#include "model/backend.h"
#include "model/model_spec.h"

namespace asgd {

// Labelled batches of `rows` random rows for `spec` (a frame model).
struct TestBatch {
  std::vector<float> inputs;
  std::vector<int32_t> labels;
  Batch batch() const {
    return Batch{static_cast<int>(labels.size()), 1, inputs, labels};
  }
};
std::vector<TestBatch> RandomBatches(const ModelSpec& spec, int count,
                                     int rows, uint64_t seed);

// Chunks over a model of `num_params` of many shapes: single elements,
// groups of 1 to 2048 elements, first groups shorter than the rest, chunks
// that end inside a group, and elements between chunks that no chunk
// covers.
OneBitPlan VariedPlan(int64_t num_params);

// Top-k chunks over a model of `num_params` from its first element to its
// last, of 1 to 70,000 elements, k from none to all, elements between
// some of them that no chunk covers.
TopKPlan VariedTopKPlan(int64_t num_params);

// With a model loaded and minibatches in the sum: an Inf put into the
// residual at element `at` makes TakeOneBit (of VariedPlan) refuse with
// InvalidArgument, writing nothing to its output or the residual; the sum
// is dropped; then TakeTopK (of VariedTopKPlan) refuses likewise.
void ExpectNonFiniteResidualRefused(ModelBackend& backend, int64_t at);

// See the file comment; `params` is loaded first.
void ExpectTopKMatches(ModelBackend& backend, const std::vector<float>& params,
                       uint64_t seed);

void ExpectResidentMatches(ModelBackend& backend, ModelBackend& reference,
                           const std::vector<float>& params,
                           const std::vector<TestBatch>& batches,
                           const OneBitPlan& plan, bool exact,
                           double tolerance);

}  // namespace asgd

#endif  // ASGD_MODEL_RESIDENT_CHECK_H_
