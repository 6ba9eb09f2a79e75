#include "cases/CaseUtil.h"

#include <stdexcept>

#include "deepinfer/Reference.h"

namespace deepinfer::testing {

void runReferenceOrThrow(const std::string& op, const OpAttrs& attrs, TensorMap& tensors,
                         const std::string& what) {
  Status s = runReference(op, attrs, tensors);
  if (!s.ok()) throw std::runtime_error(what + ": the reference rejected the case: " + s.error().message);
}

HostTensor writerBuiltKvCache(Rng& rng, int64_t numPages, int64_t blockSize,
                              const std::vector<int64_t>& filledPages, double sigma) {
  auto c = deepinfer::writerBuiltKvCache(rng, numPages, blockSize, filledPages, sigma, runReference);
  if (!c.ok()) throw std::runtime_error("writerBuiltKvCache: the reference rejected the case: " + c.error().message);
  return std::move(*c);
}

}  // namespace deepinfer::testing
