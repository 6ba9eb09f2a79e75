// RUN: not deepinfer-opt %s --di-specialize-target=target=sm_75 2>&1 | FileCheck %s
// CHECK: unknown target 'sm_75' (use sm_80, sm_86, sm_89, sm_90 or a preset name)
module {}
