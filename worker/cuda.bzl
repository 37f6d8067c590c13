"""The worker's CUDA targets, defined only where a CUDA toolkit was found.

With a toolkit (@asgd_cuda's CUDA_FOUND, see //third_party/cuda):
  :cuda_dnn          the backend, nvcc-compiled objects wrapped in a cc_library
  :libasgd_cuda.so   the plugin the worker dlopens (asgd_worker links no CUDA)
  :cuda_dnn_test     CPU-vs-CUDA tests (they skip on a machine without a GPU)
Without one, :cuda_dnn_test is a stand-in that reports itself skipped with
the reason, so test totals say what was not built.
"""

load("@asgd_cuda//:defs.bzl", "CUDA_FOUND", "NVCC")

# cuda_dnn_kernels.cu holds the device code and needs nothing but CUDA;
# cuda_dnn.cu is the host-side backend class (absl, cuBLAS). Both build sm_80
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
            name = "cuda_dnn_test",
            srcs = ["cuda_absent_test.cc"],
            deps = [
                ":cuda_loader",
                "//third_party:gtest_main",
            ],
        )
        return

    native.genrule(
        name = "cuda_dnn_kernels_o",
        srcs = [
            "cuda_dnn_kernels.cu",
            "cuda_dnn_kernels.h",
        ],
        outs = ["cuda_dnn_kernels.o"],
        cmd = _nvcc("cuda_dnn_kernels.cu"),
    )

    native.genrule(
        name = "cuda_dnn_o",
        srcs = [
            "cuda_dnn.cu",
            "cuda_dnn.h",
            "cuda_dnn_kernels.h",
            "cuda_options.h",
            "dnn.h",
            "//common:dnn_spec.h",
            "//common:model_layout.h",
            "//common:status_macros.h",
        ],
        outs = ["cuda_dnn.o"],
        cmd = _nvcc("cuda_dnn.cu"),
    )

    native.cc_library(
        name = "cuda_dnn",
        srcs = [
            ":cuda_dnn_kernels_o",
            ":cuda_dnn_o",
        ],
        hdrs = ["cuda_dnn.h"],
        deps = [
            ":cuda_options",
            ":dnn",
            "//common:dnn_spec",
            "//common:status_macros",
            "//third_party:absl",
            "@asgd_cuda//:cuda",
        ],
    )

    native.cc_test(
        name = "cuda_dnn_test",
        srcs = ["cuda_dnn_test.cc"],
        deps = [
            ":cuda_dnn",
            ":dnn",
            "//common:dnn_spec",
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
            ":cuda_dnn",
            ":cuda_options",
            ":dnn",
        ],
    )
