"""The CUDA backend's targets, defined only where a CUDA toolkit was found.

With a toolkit (@asgd_cuda's CUDA_FOUND, see //third_party/cuda):
  :cuda_backend      the backend, nvcc-compiled objects wrapped in a cc_library
  :libasgd_cuda.so   the plugin the worker dlopens (asgd_worker links no CUDA)
  :cuda_backend_test, :cuda_conv_test, :cuda_lstm_test, :cuda_resident_test,
  :cuda_replay_test, :cuda_layer_range_test
                     CPU-vs-CUDA tests (they skip on a machine without a GPU)
Without one, :cuda_backend_test is a stand-in that reports itself skipped
with the reason, so test totals say what was not built.
"""

load("@asgd_cuda//:defs.bzl", "CUDA_FOUND", "NVCC")

# The plugin's sources, one object each: cuda_util.cu (errors, RAII owners,
# the row-major GEMM), cuda_kernels.cu (the reduction kernels), one file per
# layer type (cuda_dense.cu, cuda_conv.cu, cuda_lstm.cu, each running the
# steps of its <kind>_impl.h with CudaExec) and their factory
# (cuda_layer.cu), the resident model (cuda_resident*.cu, its top-k encoding
# cuda_top_k.cu), the device replay
# of delta-pull updates (cuda_replay.cu) and the mirrors of pulled models
# (cuda_mirrors.cu), the teacher-student loss
# (cuda_soft_targets.cu), a pipeline stage's layers (cuda_layer_range.cu),
# the minibatches' two device slots (cuda_batch_stager.cu), the backend
# class (cuda_backend.cu) and the layer profile (op_timer.cu,
# cuda_profile.cu). All build sm_80
# (A100) and sm_90 (H100/H200) machine code plus compute_90 PTX that newer
# GPUs can JIT-compile. Every object lists every header of the plugin (and
# the model headers they include) in its srcs, so that a change to one
# rebuilds what may include it. nvcc names
# its temporary files after its pid, which is the same in every sandbox: each
# run gets its own TMPDIR. (Bazel's C++ rules cannot compile them: the
# toolkit's headers are outside the execution root and undeclared.)
_CU_SOURCES = [
    "cuda_util",
    "cuda_kernels",
    "cuda_layer",
    "cuda_dense",
    "cuda_conv",
    "cuda_lstm",
    "cuda_resident",
    "cuda_resident_model",
    "cuda_top_k",
    "cuda_replay",
    "cuda_mirrors",
    "cuda_soft_targets",
    "cuda_layer_range",
    "cuda_batch_stager",
    "cuda_backend",
    "op_timer",
    "cuda_profile",
]

_CU_HEADERS = [
    "batch_staging.h",
    "conv_impl.h",
    "cuda_backend.h",
    "cuda_batch_stager.h",
    "cuda_device.cuh",
    "cuda_exec.cuh",
    "cuda_kernels.h",
    "cuda_layer.h",
    "cuda_layer_range.h",
    "cuda_mirrors.h",
    "cuda_options.h",
    "cuda_profile.h",
    "cuda_replay.h",
    "cuda_resident.h",
    "cuda_resident_model.h",
    "cuda_soft_targets.h",
    "cuda_util.h",
    "dense_impl.h",
    "layer_math.h",
    "loss_impl.h",
    "lstm_impl.h",
    "op_timer.h",
    "replay_impl.h",
    "top_k_impl.h",
    "//common:bf16_bits.h",
    "//common:model_layout.h",
    "//common:status_macros.h",
    "//common:wire_codec.h",
    "//compression:grad_codec.h",
    "//compression:one_bit_plan.h",
    "//compression:top_k_plan.h",
    "//model:backend.h",
    "//model:batch_check.h",
    "//model:exact_copy.h",
    "//model:layer_range.h",
    "//model:model_spec.h",
    "//model:softmax_loss.h",
    "//step:replay_plan.h",
]

def _nvcc(src):
    return ("t=$$(mktemp -d) && trap 'rm -rf \"$$t\"' EXIT && TMPDIR=$$t " +
            NVCC + " -std=c++17 -O3 -Xcompiler -fPIC,-Wall " +
            "-gencode arch=compute_80,code=sm_80 " +
            "-gencode arch=compute_90,code=sm_90 " +
            "-gencode arch=compute_90,code=compute_90 -I. " +
            "-c $(location " + src + ") -o $@")

# The CPU-vs-CUDA tests, one file per layer kind.
_CUDA_TESTS = [
    "cuda_backend_test",
    "cuda_conv_test",
    "cuda_lstm_test",
    "cuda_resident_test",
    "cuda_replay_test",
    "cuda_layer_range_test",
]

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

    for name in _CU_SOURCES:
        native.genrule(
            name = name + "_o",
            srcs = [name + ".cu"] + _CU_HEADERS,
            outs = [name + ".o"],
            cmd = _nvcc(name + ".cu"),
        )

    native.cc_library(
        name = "cuda_backend",
        srcs = [":" + name + "_o" for name in _CU_SOURCES],
        hdrs = [
            "cuda_backend.h",
            "cuda_layer_range.h",
            "cuda_profile.h",
            "cuda_replay.h",
        ],
        deps = [
            ":cuda_options",
            "//common:bf16_bits",
            "//common:status_macros",
            "//common:wire_codec",
            "//compression:grad_codec",
            "//compression:one_bit_plan",
            "//compression:top_k_plan",
            "//model:backend",
            "//model:batch_check",
            "//model:exact_copy",
            "//model:layer_range",
            "//model:model_spec",
            "//model:softmax_loss",
            "//step:replay_plan",
            "//third_party:absl",
            "@asgd_cuda//:cuda",
        ],
    )

    native.cc_library(
        name = "cuda_test_util",
        testonly = True,
        srcs = ["cuda_test_util.cc"],
        hdrs = ["cuda_test_util.h"],
        deps = [
            ":backend_compare",
            ":cuda_backend",
            ":cuda_options",
            "//model:cpu_backend",
            "//model:model_spec",
            "//third_party:absl",
            "//third_party:gtest",
        ],
        visibility = ["//visibility:private"],
    )

    for name in _CUDA_TESTS:
        native.cc_test(
            name = name,
            srcs = [name + ".cc"],
            deps = [
                ":backend_compare",
                ":cuda_backend",
                ":cuda_test_util",
                ":host_replay_copy",
                ":replay_cases",
                "//model:backend",
                "//model:cpu_backend",
                "//model:cpu_layer_range",
                "//model:layer_range",
                "//model:model_presets",
                "//model:model_spec",
                "//model:resident_check",
                "//compression:grad_codec",
                "//compression:one_bit_plan",
                "//compression:top_k_plan",
                "//step:compressed_apply",
                "//step:optimizer",
                "//step:replay_plan",
                "//third_party:absl",
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
