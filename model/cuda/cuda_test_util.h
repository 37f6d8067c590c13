// What the CPU-vs-CUDA tests (cuda_backend_test.cc, cuda_conv_test.cc,
// cuda_lstm_test.cc) share: skipping without a device, and one comparison
// run of the CUDA backend against the CPU backend over several batches on
// one instance of each (backend_compare.h does the comparing).
//
// Thread-safety: test code; one thread.
#ifndef ASGD_MODEL_CUDA_CUDA_TEST_UTIL_H_
#define ASGD_MODEL_CUDA_CUDA_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/cuda/backend_compare.h"
#include "model/cuda/cuda_backend.h"
#include "model/cuda/cuda_options.h"
#include "model/model_spec.h"

// Skips the current test, with the reason, on a machine without a usable
// CUDA device.
#define SKIP_WITHOUT_CUDA()                                 \
  do {                                                      \
    if (!::asgd::CudaDeviceAvailable()) {                   \
      GTEST_SKIP() << ::asgd::CudaDeviceStatus().message(); \
    }                                                       \
  } while (false)

namespace asgd {

struct BatchShape {
  int sequences;
  int steps;
};

// One CPU and one CUDA backend for `spec` (max_rows: the largest shape),
// then for each shape in order a batch from MakeCompareBatch (every
// threshold decision kink_clear clear, a quarter of the rows unlabelled,
// seeds from `seed`) compared with ExpectBackendsAgree at
// ToleranceFor(options.math). The largest shape should come first, so that
// smaller batches run on buffers that hold a larger one's leftovers. Records
// the worst errors as test properties (see test.xml) and returns them.
CompareReport ExpectCudaMatchesCpu(const ModelSpec& spec,
                                   const CudaOptions& options,
                                   const std::vector<BatchShape>& shapes,
                                   double kink_clear, uint32_t seed,
                                   const std::string& name);

}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_CUDA_TEST_UTIL_H_
