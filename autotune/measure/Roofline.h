// The measured ceilings of the local GPU (the roofline every row is compared with): the
// bandwidth of a large device-to-device copy (bytes read + bytes written per second) and the
// mma.sync bf16 tensor-core rate, both from microkernels (kernels/BenchKernels.cu).
#pragma once
#include <string>

#include "BenchTiming.h"
#include "deepinfer/DeviceModule.h"

namespace deepinfer::bench {

struct Ceilings {
  double copyGBs = 0;     // 0: not measured (copyError says why)
  int64_t copyBytes = 0;  // size of the copied buffer
  TimingStats copyTiming;
  std::string copyError;
  double mmaTflops = 0;   // 0: not measured (mmaError says why)
  double mmaFlops = 0;    // FLOPs of one launch (2*16*8*16 per mma)
  TimingStats mmaTiming;
  std::string mmaError;
};

// Never fails as a whole: a ceiling that cannot be measured carries its error, and rows then
// report no roofline fraction. `kernels` is the loaded BenchKernels module (null: not available,
// `unavailable` says why).
Ceilings measureCeilings(const Device& dev, const DeviceModule* kernels, const std::string& unavailable,
                         int samples);

// The floor of a piece of work: the time its bytes take at the measured copy bandwidth and the
// time its FLOPs take at the measured mma.sync rate; the larger one bounds it.
struct RooflineFloor {
  enum class Bound { None, Copy, Mma };
  double copyUs = 0;  // bytes / copy bandwidth (0: no bytes, or the copy ceiling not measured)
  double mmaUs = 0;   // FLOPs / mma.sync rate (0: no FLOPs, or the mma ceiling not measured)
  double us() const { return copyUs > mmaUs ? copyUs : mmaUs; }
  // Copy when the bytes take at least as long as the FLOPs; None when neither applies.
  Bound bound() const { return us() <= 0 ? Bound::None : copyUs >= mmaUs ? Bound::Copy : Bound::Mma; }
  double fractionOf(double measuredUs) const { return measuredUs > 0 ? us() / measuredUs : 0; }
};
RooflineFloor rooflineFloor(const Ceilings& c, double bytes, double flops);
// "copy" or "mma" (reports and JSON), "" for None.
const char* boundName(RooflineFloor::Bound b);

// rooflineFloor(c, bytes, flops).us(): 0 when neither ceiling applies.
double rooflineFloorUs(const Ceilings& c, double bytes, double flops);

}  // namespace deepinfer::bench
