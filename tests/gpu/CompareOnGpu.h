// One kernel run on a case, compared output by output: the loop every kernel test shares.
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "cases/OpCases.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/Specialize.h"

namespace deepinfer::testing_util {

// Runs `op` on case `c` for `target` (opts: config, stream; outputs poisoned by runOpOnGpu) and
// compares every output with `ref`, the reference's outputs; outputs defined on another output of
// the kernel (mhc_fused_post_pre's next-sublayer outputs are mhc_pre of the op's own bf16
// residual) are expected from that output. `note(output, report, kernel)` sees each comparison
// (e.g. to write a results row); `ran`, when given, receives the kernel that ran. `how` goes into
// every failure message after the config (e.g. " with programmatic launches").
template <class Note>
void runAndCompare(Jit& jit, const std::string& op, const deepinfer::testing::OpCase& c, const TargetProfile& target,
                   const GpuRunOptions& opts, const TensorMap& ref, int& compared, Note note,
                   std::shared_ptr<const LoadedKernel>* ran = nullptr, const std::string& how = "") {
  TensorMap gpu = c.inputs;
  auto run = runOpOnGpu(jit, op, c.attrs, target, gpu, opts);
  ASSERT_TRUE(run.ok()) << op << " [" << c.name << "] on " << target.name << ": " << run.error().message;
  if (ran) *ran = run->kernel;
  const std::string cfgStr = configToString(run->kernel->config.config);
  auto fromKernel = deepinfer::testing::expectedFromKernelOutputs(op, c.attrs, c.inputs, gpu);
  ASSERT_TRUE(fromKernel.ok()) << c.name << ": " << fromKernel.error().message;
  for (const auto& out : deepinfer::testing::outputNames(op)) {
    const HostTensor& want = fromKernel->count(out) ? fromKernel->at(out) : ref.at(out);
    auto rep = deepinfer::testing::compareOutputs(op, out, want, gpu.at(out), c.attrs, c.inputs);
    ++compared;
    note(out, rep, *run->kernel);
    EXPECT_TRUE(rep.ok) << op << " [" << c.name << "] on " << target.name << " {" << cfgStr << "}" << how
                        << " output '" << out << "': " << rep.metric << " " << rep.maxErr << ": " << rep.detail;
  }
}

}  // namespace deepinfer::testing_util
