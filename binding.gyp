{
  "targets": [
    {
      "target_name": "tiercut_native",
      "sources": [
        "native/addon.cc",
        "native/napi/session.cc",
        "native/napi/testing.cc",
        "native/plan/program.cc",
        "native/tiers/arena.cc",
        "native/exec/executor.cc",
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
        "native/napi/adam.cc"
      ],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")"
      ],
      "defines": [
        "NAPI_VERSION=8",
        "NAPI_CPP_EXCEPTIONS"
      ],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti", "-std=gnu++17", "-std=gnu++20"],
      "cflags": ["-pthread"],
      "cflags_cc": ["-O3", "-std=c++17", "-fno-math-errno", "-ffp-contract=off", "-fexceptions", "-pthread"],
      "ldflags": ["-pthread"],
      "xcode_settings": {
        "GCC_ENABLE_CPP_EXCEPTIONS": "YES",
        "CLANG_CXX_LANGUAGE_STANDARD": "c++17",
        "OTHER_CPLUSPLUSFLAGS": ["-O3", "-fno-math-errno", "-ffp-contract=off"]
      }
    }
  ]
}
