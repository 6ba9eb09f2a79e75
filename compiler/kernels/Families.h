// One accessor per kernel family; Registry.cpp lists them. Each lives in <Op>Family.cpp.
#pragma once
#include "deepinfer/KernelFamily.h"

namespace deepinfer {
const KernelFamily& kvQuantInsertFamily();
const KernelFamily& gatherKcacheFamily();
const KernelFamily& combineTopkSwaFamily();
const KernelFamily& gatherKcacheCombineFamily();
const KernelFamily& sparseMlaPrefillFamily();
const KernelFamily& sparseMlaDecodeFamily();
const KernelFamily& indexerLogitsFamily();
const KernelFamily& topkFamily();
const KernelFamily& mhcPreFamily();
const KernelFamily& mhcPostFamily();
const KernelFamily& mhcFusedPostPreFamily();
const KernelFamily& mhcCollapseFamily();
const KernelFamily& weightGemmFamily();
const KernelFamily& moeExpertsFamily();
}  // namespace deepinfer
