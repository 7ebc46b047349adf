{
  "variables": {
    "tiercut_have_mpi%": "<!(sh native/ring/mpi_flags.sh have)",
    "tiercut_have_liburing%": "<!(sh native/tiers/uring_flags.sh have)"
  },
  "targets": [
    {
      "target_name": "tiercut_native",
      "sources": [
        "native/addon.cc",
        "native/napi/session.cc",
        "native/napi/testing.cc",
        "native/napi/ring.cc",
        "native/ring/comm_threads.cc",
        "native/ring/ring_attention.cc",
        "native/ring/ring_threads.cc",
        "native/plan/program.cc",
        "native/tiers/arena.cc",
        "native/tiers/nvme_store.cc",
        "native/tiers/nvme_run.cc",
        "native/tiers/nvme_threads.cc",
        "native/tiers/nvme_uring.cc",
        "native/napi/calibrate.cc",
        "native/exec/executor.cc",
        "native/exec/collective.cc",
        "native/kernels/matmul.cc",
        "native/kernels/elementwise.cc",
        "native/kernels/layernorm.cc",
        "native/kernels/softmax.cc",
        "native/kernels/attention.cc",
        "native/kernels/embedding.cc",
        "native/kernels/cross_entropy.cc",
        "native/kernels/shape.cc",
        "native/kernels/adam.cc",
        "native/kernels/dispatch.cc",
        "native/adam/cpu_adam.cc",
        "native/adam/thread_pool.cc",
        "native/napi/adam.cc",
        "native/kernels/pointwise.cc",
        "native/kernels/broadcast.cc",
        "native/kernels/slice.cc",
        "native/kernels/bmm.cc",
        "native/kernels/log_softmax.cc",
        "native/kernels/rmsnorm.cc",
        "native/kernels/activation.cc",
        "native/kernels/rope.cc",
        "native/kernels/conv.cc",
        "native/kernels/batchnorm.cc",
        "native/kernels/pool.cc"
      ],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")"
      ],
      "defines": [
        "NAPI_VERSION=8",
        "NAPI_CPP_EXCEPTIONS",
        "NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS",
        "TIERCUT_HAVE_LIBURING=<(tiercut_have_liburing)"
      ],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti", "-std=gnu++17", "-std=gnu++20"],
      "cflags": ["-pthread"],
      "cflags_cc": ["-O3", "-std=c++17", "-fno-math-errno", "-ffp-contract=off", "-fexceptions", "-pthread"],
      "ldflags": ["-pthread"],
      "conditions": [
        ["tiercut_have_liburing==1", {
          "libraries": ["<!@(sh native/tiers/uring_flags.sh libs)"]
        }]
      ],
      "xcode_settings": {
        "GCC_ENABLE_CPP_EXCEPTIONS": "YES",
        "CLANG_CXX_LANGUAGE_STANDARD": "c++17",
        "OTHER_CPLUSPLUSFLAGS": ["-O3", "-fno-math-errno", "-ffp-contract=off"]
      }
    },
    {
      "target_name": "tiercut_ring_mpi",
      "sources": [
        "native/ring/mpi_addon.cc",
        "native/ring/comm_mpi.cc",
        "native/ring/ring_attention.cc"
      ],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")"
      ],
      "defines": [
        "NAPI_VERSION=8",
        "NAPI_CPP_EXCEPTIONS",
        "NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS",
        "TIERCUT_HAVE_MPI=<(tiercut_have_mpi)"
      ],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti", "-std=gnu++17", "-std=gnu++20"],
      "cflags": ["-pthread"],
      "cflags_cc": ["-O3", "-std=c++17", "-fno-math-errno", "-fexceptions", "-pthread"],
      "ldflags": ["-pthread"],
      "conditions": [
        ["tiercut_have_mpi==1", {
          "cflags_cc": ["<!@(sh native/ring/mpi_flags.sh cflags)"],
          "libraries": ["<!@(sh native/ring/mpi_flags.sh libs)"]
        }]
      ],
      "xcode_settings": {
        "GCC_ENABLE_CPP_EXCEPTIONS": "YES",
        "CLANG_CXX_LANGUAGE_STANDARD": "c++17",
        "OTHER_CPLUSPLUSFLAGS": ["-O3", "-fno-math-errno"]
      }
    }
  ]
}
