// The model the tensor-parallel tests split: the tiny preset with 16 attention heads, so tp 2 leaves
// 8 heads per rank (the attention kernels' multiple of 8) and 1 output group per rank.
#pragma once
#include <gtest/gtest.h>

#include "model/MakeModelPresets.h"

namespace deepinfer::testing {

inline ModelConfig tiny16() {
  auto c = makeModelPresetConfig("tiny");
  EXPECT_TRUE(c.ok());
  ModelConfig cfg = *c;
  cfg.numAttentionHeads = 16;
  return cfg;
}

}  // namespace deepinfer::testing
