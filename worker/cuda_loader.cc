#include "worker/cuda_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

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
      out.push_back(absl::StrCat(root, "/asgd/worker/", kPluginName));
    }
  }
  out.push_back(absl::StrCat(exe, ".runfiles/asgd/worker/", kPluginName));
  out.push_back(kPluginName);
  return out;
}

absl::StatusOr<const CudaPluginApi*> Load() {
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

absl::StatusOr<const CudaPluginApi*> LoadCudaPlugin() {
  static const auto* const result =
      new absl::StatusOr<const CudaPluginApi*>(Load());
  return *result;
}

}  // namespace asgd
