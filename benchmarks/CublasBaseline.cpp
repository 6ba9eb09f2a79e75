#include "CublasBaseline.h"

#include <fmt/format.h>

#include <vector>

#include "deepinfer/Formats.h"
#include "deepinfer/LaunchTally.h"
#include "reference/QuantGemmRef.h"

namespace deepinfer::bench {

VariantResult cublasBaseline(Cublas& blas, const BenchCase& c, const TimingOptions& t) {
  VariantResult r;
  r.kind = "cublas-bf16";
  r.target = "cublas";
  r.config = "bf16 weights (dequantized at load), fp32 accumulation";
  r.check.note = "baseline: not the op's output";
  auto fail = [&](const std::string& why) {
    r.error = why;
    return r;
  };
  const HostTensor& x = c.inputs.at("x");
  const int bits = int(c.attrs.getInt("weight_bits", 8));
  const int64_t G = c.attrs.getInt("groups", 1), M = x.dim(0), K = x.dim(1), Kg = K / G;
  const int64_t N = c.inputs.at("w").dim(0), Ng = N / G;
  const bool gated = c.attrs.getInt("epilogue", 0) == 2;
  auto dequant = [&](const char* codes, const char* scales) -> Result<DeviceBuffer> {
    const ref::QuantMatrix q{bits, c.inputs.at(codes).ptr<uint8_t>(), c.inputs.at(scales).ptr<uint8_t>(), N, Kg};
    std::vector<float> row(static_cast<size_t>(Kg));
    std::vector<uint16_t> w(size_t(N * Kg));
    for (int64_t n = 0; n < N; ++n) {
      q.row(n, row.data());
      for (int64_t k = 0; k < Kg; ++k) w[size_t(n * Kg + k)] = floatToBf16(row[size_t(k)]);
    }
    auto b = DeviceBuffer::alloc(w.size() * 2);
    if (!b.ok()) return b.error();
    DI_TRY(b->upload(w.data(), w.size() * 2));
    return b;
  };
  auto w = dequant("w", "w_scale");
  if (!w.ok()) return fail(w.error().message);
  std::optional<DeviceBuffer> up;
  if (gated) {
    auto u = dequant("w_up", "w_up_scale");
    if (!u.ok()) return fail(u.error().message);
    up = std::move(*u);
  }
  auto xb = DeviceBuffer::alloc(x.bytes.size());
  auto yb = DeviceBuffer::alloc(size_t(M * N) * 4 * (gated ? 2 : 1));
  if (!xb.ok() || !yb.ok()) return fail(!xb.ok() ? xb.error().message : yb.error().message);
  if (Status s = xb->upload(x.bytes.data(), x.bytes.size()); !s.ok()) return fail(s.error().message);
  auto launch = [&]() -> Status {
    if (G > 1)
      return blas.gemmBf16F32Batched(xb->addr(), K, Kg, w->addr(), Kg, Ng * Kg, yb->addr(), N, Ng, M, Ng, Kg, G,
                                     nullptr);
    DI_TRY(blas.gemmBf16F32(xb->addr(), K, w->addr(), Kg, yb->addr(), N, M, N, Kg, nullptr));
    if (gated) DI_TRY(blas.gemmBf16F32(xb->addr(), K, up->addr(), Kg, yb->addr() + uint64_t(M * N * 4), N, M, N, Kg, nullptr));
    return {};
  };
  const LaunchTally before = threadLaunchTally();
  if (Status s = launch(); !s.ok()) return fail(s.error().message);
  r.kernelsPerLaunch = (threadLaunchTally() - before).launches();  // cuBLAS calls: one kernel each at least
  auto timing = timeOnDevice(launch, t);
  if (!timing.ok()) return fail(timing.error().message);
  r.timing = *timing;
  return r;
}

}  // namespace deepinfer::bench
