#include "model/cuda/cuda_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "asgd_cuda/cuda_config.h"

// A test builds this file with ASGD_FORCE_NO_CUDA to check what a build
// without a toolkit does on a machine that has one.
#if ASGD_CUDA_FOUND && !defined(ASGD_FORCE_NO_CUDA)
#define ASGD_HAVE_CUDA_PLUGIN 1
#else
#define ASGD_HAVE_CUDA_PLUGIN 0
#endif

namespace asgd {
namespace {

constexpr char kPluginName[] = "libasgd_cuda.so";

std::string ExecutablePath() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n <= 0 ? "" : std::string(buf, n);
}

// Where the plugin may be: next to the executable (installed binaries and
// //worker binaries), in Bazel runfiles (tests, `bazel run`, binaries of
// other packages), then wherever the dynamic linker looks.
std::vector<std::string> Candidates() {
  const std::string exe = ExecutablePath();
  const std::string dir = exe.substr(0, exe.rfind('/') + 1);
  std::vector<std::string> out = {dir + kPluginName};
  for (const char* env : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    if (const char* root = std::getenv(env); root != nullptr && *root != 0) {
      out.push_back(absl::StrCat(root, "/asgd/model/cuda/", kPluginName));
    }
  }
  out.push_back(absl::StrCat(exe, ".runfiles/asgd/model/cuda/", kPluginName));
  out.push_back(kPluginName);
  return out;
}

absl::StatusOr<const CudaPluginApi*> Load() {
  if (absl::Status build = CudaBuildStatus(); !build.ok()) return build;
  std::string errors;
  void* handle = nullptr;
  for (const std::string& candidate : Candidates()) {
    handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) break;
    const char* error = dlerror();
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", error ? error : candidate);
  }
  if (handle == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "the CUDA backend (", kPluginName, ") cannot be loaded: ", errors));
  }
  using ApiFn = const CudaPluginApi* (*)();
  auto api_fn = reinterpret_cast<ApiFn>(dlsym(handle, "asgd_cuda_plugin_api"));
  if (api_fn == nullptr) {
    return absl::UnavailableError(
        absl::StrCat(kPluginName, " has no asgd_cuda_plugin_api"));
  }
  const CudaPluginApi* api = api_fn();
  if (api == nullptr || api->abi_version != kCudaPluginAbiVersion) {
    return absl::UnavailableError(absl::StrCat(
        kPluginName, " was built for another version of asgd"));
  }
  return api;
}

}  // namespace

absl::Status CudaBuildStatus() {
#if ASGD_HAVE_CUDA_PLUGIN
  return absl::OkStatus();
#else
  return absl::UnavailableError(absl::StrCat(
      "this asgd was built without CUDA support (", ASGD_CUDA_SEARCH,
      "). To use --backend=cuda, install a CUDA toolkit with cuBLAS (12 or "
      "later; NVIDIA's packages, not in Debian main), then rebuild with "
      "CUDA_HOME set to it, or with nvcc on PATH, or with it at "
      "/usr/local/cuda: `bazel sync --configure && bazel build "
      "//worker:asgd_worker`. --backend=auto and --backend=cpu work "
      "without it"));
#endif
}

absl::StatusOr<const CudaPluginApi*> LoadCudaPlugin() {
  static const auto* const result =
      new absl::StatusOr<const CudaPluginApi*>(Load());
  return *result;
}

}  // namespace asgd
