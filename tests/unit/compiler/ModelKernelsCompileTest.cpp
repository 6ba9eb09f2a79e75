// The model-kernel unit (runtime/model/gpu/ModelKernels.h, templates/model/*.cuh) compiles through
// NVRTC for every Ampere-and-newer target the runtime loads it for, with no spills, without
// fp32 contraction (--fmad=false), and keys the cache by those options. Needs no GPU.
#include <gtest/gtest.h>

#include <algorithm>

#include "deepinfer/Jit.h"
#include "model/gpu/ModelKernels.h"

using namespace deepinfer;

TEST(ModelKernelsCompile, EveryEntryCompilesWithoutSpillsOrContraction) {
  const CudaUnit u = ModelKernels::unit();
  ASSERT_GE(u.entries.size(), 20u);
  for (int arch : {80, 86, 90}) {
    auto c = compileUnit(u, "di_model_kernels.cu", arch, /*cubin=*/true, /*fmad=*/false);
    ASSERT_TRUE(c.ok()) << "sm_" << arch << ": " << c.error().message;
    EXPECT_NE(std::find(c->options.begin(), c->options.end(), "--fmad=false"), c->options.end());
    EXPECT_FALSE(c->cubin.empty());
    for (const auto& e : u.entries) {
      EXPECT_NE(c->ptx.find(".entry " + e + "("), std::string::npos) << e << " missing for sm_" << arch;
      auto it = c->resources.find(e);
      ASSERT_NE(it, c->resources.end()) << e << " has no resource report for sm_" << arch << "\n" << c->log;
      EXPECT_EQ(it->second.spillStores, 0) << e << " sm_" << arch;
      EXPECT_EQ(it->second.spillLoads, 0) << e << " sm_" << arch;
      EXPECT_LE(it->second.smemBytes, 48 * 1024) << e << " sm_" << arch;
      EXPECT_LE(it->second.registers, 255) << e << " sm_" << arch;
    }
    // Every entry waits for the prior grids first (programmatic dependent launch): the wait is
    // in sm_90 code only; below, the helper compiles to nothing and the runtime launches plainly.
    size_t waits = 0;
    for (size_t at = c->ptx.find("griddepcontrol.wait"); at != std::string::npos;
         at = c->ptx.find("griddepcontrol.wait", at + 1))
      ++waits;
    if (arch >= 90) EXPECT_GE(waits, u.entries.size()) << "sm_" << arch;
    else EXPECT_EQ(waits, 0u) << "sm_" << arch << " PTX has griddepcontrol";
    // a * b + c must round twice like the CPU reference: no fp32 fma anywhere in the unit.
    EXPECT_EQ(c->ptx.find("fma.rn.f32"), std::string::npos) << "sm_" << arch << " PTX contracts fp32 math";
  }
}

TEST(ModelKernelsCompile, PtxBuildForSm80) {
  auto c = compileUnit(ModelKernels::unit(), "di_model_kernels.cu", 80, /*cubin=*/false, /*fmad=*/false);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_TRUE(c->cubin.empty());
  EXPECT_NE(c->ptx.find(".target sm_80"), std::string::npos);
}

TEST(ModelKernelsCompile, CacheKeyCoversOptionsAndArch) {
  const std::string k80 = ModelKernels::cacheKey(80, true);
  EXPECT_EQ(k80, ModelKernels::cacheKey(80, true));
  EXPECT_NE(k80, ModelKernels::cacheKey(80, false));
  EXPECT_NE(k80, ModelKernels::cacheKey(86, true));
  // Not the key the same unit would have with the project's default (--fmad=true) options.
  EXPECT_NE(k80, kernelContentKey(ModelKernels::unit(), 80, true));
  const auto o = ModelKernels::options(86, false);
  EXPECT_NE(std::find(o.begin(), o.end(), "--fmad=false"), o.end());
  EXPECT_EQ(std::find(o.begin(), o.end(), "--fmad=true"), o.end());
}
