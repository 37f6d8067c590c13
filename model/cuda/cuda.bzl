"""The CUDA backend's targets, defined only where a CUDA toolkit was found.

With a toolkit (@asgd_cuda's CUDA_FOUND, see //third_party/cuda):
  :cuda_backend      the backend, nvcc-compiled objects wrapped in a cc_library
  :libasgd_cuda.so   the plugin the worker dlopens (asgd_worker links no CUDA)
  :cuda_backend_test CPU-vs-CUDA tests (they skip on a machine without a GPU)
Without one, :cuda_backend_test is a stand-in that reports itself skipped
with the reason, so test totals say what was not built.
"""

load("@asgd_cuda//:defs.bzl", "CUDA_FOUND", "NVCC")

# cuda_kernels.cu holds the device code and needs nothing but CUDA;
# cuda_backend.cu is the host-side backend class (absl, cuBLAS). Both build sm_80
# (A100) and sm_90 (H100/H200) machine code plus compute_90 PTX that newer GPUs
# can JIT-compile. The headers a .cu includes are listed in its srcs so that a
# change to them rebuilds it. nvcc names its temporary files after its pid,
# which is the same in every sandbox: each run gets its own TMPDIR. (Bazel's
# C++ rules cannot compile them: the toolkit's headers are outside the
# execution root and undeclared.)
def _nvcc(src):
    return ("t=$$(mktemp -d) && trap 'rm -rf \"$$t\"' EXIT && TMPDIR=$$t " +
            NVCC + " -std=c++17 -O3 -Xcompiler -fPIC,-Wall " +
            "-gencode arch=compute_80,code=sm_80 " +
            "-gencode arch=compute_90,code=sm_90 " +
            "-gencode arch=compute_90,code=compute_90 -I. " +
            "-c $(location " + src + ") -o $@")

def asgd_cuda_targets():
    if not CUDA_FOUND:
        native.cc_test(
            name = "cuda_backend_test",
            srcs = ["cuda_absent_test.cc"],
            deps = [
                ":cuda_loader",
                "//third_party:gtest_main",
            ],
        )
        return

    native.genrule(
        name = "cuda_kernels_o",
        srcs = [
            "cuda_kernels.cu",
            "cuda_kernels.h",
        ],
        outs = ["cuda_kernels.o"],
        cmd = _nvcc("cuda_kernels.cu"),
    )

    native.genrule(
        name = "cuda_backend_o",
        srcs = [
            "cuda_backend.cu",
            "cuda_backend.h",
            "cuda_kernels.h",
            "cuda_options.h",
            "//common:model_layout.h",
            "//common:status_macros.h",
            "//model:backend.h",
            "//model:batch_check.h",
            "//model:model_spec.h",
        ],
        outs = ["cuda_backend.o"],
        cmd = _nvcc("cuda_backend.cu"),
    )

    native.cc_library(
        name = "cuda_backend",
        srcs = [
            ":cuda_backend_o",
            ":cuda_kernels_o",
        ],
        hdrs = ["cuda_backend.h"],
        deps = [
            ":cuda_options",
            "//common:status_macros",
            "//model:backend",
            "//model:batch_check",
            "//model:model_spec",
            "//third_party:absl",
            "@asgd_cuda//:cuda",
        ],
    )

    native.cc_test(
        name = "cuda_backend_test",
        srcs = ["cuda_backend_test.cc"],
        deps = [
            ":cuda_backend",
            "//model:backend",
            "//model:cpu_backend",
            "//model:model_spec",
            "//third_party:gtest_main",
        ],
    )

    # The plugin, loaded by the worker only when asked for (cuda_plugin.h).
    native.cc_binary(
        name = "libasgd_cuda.so",
        srcs = [
            "cuda_plugin.cc",
            "cuda_plugin.h",
        ],
        linkshared = True,
        deps = [
            ":cuda_backend",
            ":cuda_options",
            "//model:backend",
        ],
    )
