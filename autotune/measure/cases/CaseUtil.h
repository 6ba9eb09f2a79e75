// Building blocks of the case generators: a seeded generator with a fixed algorithm (cases
// must be the same bytes on every machine), random tensors, and fp8 caches built the way the
// writers build them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cases/CompareOutputs.h"
#include "deepinfer/Tensor.h"

namespace deepinfer::testing {

// SplitMix64 with Box-Muller normals: small, fast and the same everywhere (unlike
// std::normal_distribution, whose algorithm the standard leaves open).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  double uniform();                       // [0, 1)
  int64_t range(int64_t lo, int64_t hi);  // [lo, hi), hi > lo
  double normal();                        // N(0, 1)
  bool chance(double p) { return uniform() < p; }

 private:
  uint64_t state_;
};

HostTensor bf16Normal(Rng& rng, std::vector<int64_t> shape, double sigma = 1.0, double mean = 0.0);
HostTensor f32Normal(Rng& rng, std::vector<int64_t> shape, double sigma = 1.0, double mean = 0.0);
HostTensor f32Uniform(Rng& rng, std::vector<int64_t> shape, double lo, double hi);
// Random bits of any dtype (for poisoned outputs and raw-byte caches).
HostTensor randomBytes(Rng& rng, DType dtype, std::vector<int64_t> shape);
void fillRandomBytes(Rng& rng, uint8_t* p, int64_t n);
HostTensor i32Tensor(std::vector<int64_t> shape, const std::vector<int32_t>& values);
HostTensor i64Tensor(std::vector<int64_t> shape, const std::vector<int64_t>& values);

// The integers [0, n) in random order.
std::vector<int64_t> shuffledRange(Rng& rng, int64_t n);

// Runs the reference; throws std::runtime_error naming `what` when it fails.
void runReferenceOrThrow(const std::string& op, const OpAttrs& attrs, TensorMap& tensors,
                         const std::string& what);

// An fp8_ds_mla cache [numPages, page_bytes] whose pages listed in `filledPages` hold N(0, sigma)
// tokens written by the kv_quant_insert reference; other bytes are zero (never read).
HostTensor writerBuiltKvCache(Rng& rng, int64_t numPages, int64_t blockSize,
                              const std::vector<int64_t>& filledPages, double sigma = 1.0);

// An indexer key cache [numPages, BS*132] (docs/ops.md §7): N(0, sigma_token) keys quantized per token
// to e4m3 with the power-of-two scale max(amax, 1e-4)/448 rounded up, stored as fp32.
HostTensor indexerKeyCache(Rng& rng, int64_t numPages, int64_t blockSize);

}  // namespace deepinfer::testing
