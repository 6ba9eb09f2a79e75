// Benchmark inputs are a fact of each op's kernel family (KernelFamily::benchInputs): valid
// random inputs at the parameters of a benchmark or tuning shape, holding what the op needs
// (index ranges, sorted ids, -1 padding, lens, UE8M0 scale bytes, fp8/fp4 codes, caches in their
// byte formats), values of realistic scale that make the kernel do all its work, and the least
// work the op must do on them. The family writes plain host buffers from a seeded generator; the
// measurement core (autotune/measure, buildCase) seeds it, checks the result against the op and
// plans the reference check, for `tune` and `deepinfer-bench` alike.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "deepinfer/Error.h"
#include "deepinfer/HostRandom.h"
#include "deepinfer/KernelFamily.h"
#include "deepinfer/Tensor.h"

namespace deepinfer {

// The parameters of one benchmark shape (its name: "op [shape]"), each read with the model's
// value as its default; a given name that no one read is an error (finish).
class BenchParams {
 public:
  BenchParams(std::string where, std::map<std::string, int64_t> given)
      : where_(std::move(where)), given_(std::move(given)) {}
  int64_t get(const std::string& name, int64_t dflt);
  // An error naming the shape and `what` it needs, when `cond` is false.
  Status require(bool cond, const std::string& what) const;
  Status finish() const;
  const std::string& where() const { return where_; }

 private:
  std::string where_;
  std::map<std::string, int64_t> given_;
  std::set<std::string> read_;
};

// Runs an op's C++ reference on host tensors, its outputs written into `tensors`. Inputs that a
// writer op produces in real runs (the fp8 KV caches) are written by that op's reference, which
// the caller passes in: the compiler does not link the references.
using HostOpReference = std::function<Status(const std::string& op, const OpAttrs& attrs, TensorMap& tensors)>;

struct BenchInputContext {
  Rng& rng;
  BenchParams& params;
  const HostOpReference& reference;
};

// Ops whose rows (tokens, requests) are independent: the C++ reference may check a subset of the
// rows, spread over the first dimension, when checking all of them costs too much.
struct BenchRowSplit {
  int64_t rows = 0;               // along the first dimension of `inputs` and of every output
  double refFlopsPerRow = 0;      // what the CPU reference does per row
  double outElementsPerRow = 0;   // what the comparison reads per row
  std::vector<std::string> inputs;  // the inputs sliced along their first dimension
};

struct BenchInputs {
  OpAttrs attrs;
  TensorMap inputs;  // every input; in/out tensors hold their initial contents
  // Fewest bytes the op must move: each input it needs read once (of paged caches and gathered
  // workspaces only the rows it references), each output written once.
  double bytes = 0;
  double flops = 0;  // 0 where not meaningful (gathers, copies, selection)
  std::optional<BenchRowSplit> rowSplit;
};

// The op's description on these inputs: attributes completed with the signature's defaults,
// shapes from the tensors, checked by the family.
Result<OpDesc> benchDesc(const KernelFamily& family, const BenchInputs& in);
// Bytes of every input and every output of the op, each once (a dense op's least traffic).
Result<double> denseBytes(const KernelFamily& family, const BenchInputs& in);
// Elements of every output per row along its first dimension.
Result<double> outputElementsPerRow(const KernelFamily& family, const BenchInputs& in);

}  // namespace deepinfer
