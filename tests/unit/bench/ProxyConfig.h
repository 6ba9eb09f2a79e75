// The `proxy` preset's config (V4.1-Flash widths, 7 layers, 128 experts) for the model-bench
// arithmetic tests, which check numbers worked out by hand for it.
#pragma once
#include <gtest/gtest.h>

#include "model/MakeModelPresets.h"

namespace deepinfer::bench {

inline ModelConfig proxy() {
  auto c = makeModelPresetConfig("proxy");
  EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message);
  return *c;
}

}  // namespace deepinfer::bench
