// One benchmark shape (docs/ops.md §10) and its built inputs: what is timed, how many bytes and
// FLOPs the op must at least move/do there, and how its outputs are checked against the C++
// reference.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "deepinfer/Error.h"
#include "deepinfer/Tensor.h"

namespace deepinfer::bench {

struct BenchSpec {
  std::string op;
  std::string shape;                      // short label, e.g. "T=1536", "48K x4"
  std::map<std::string, int64_t> params;  // the family's input parameters (its benchInputs) and check_rows
  double targetUs = 0;                    // the project's target on the H200 (0 = none)
  double publicBestUs = 0;                // best public implementation (0 = none known)
};

// How a case's outputs are compared with the reference: every row, or `rows` rows spread over
// the first dimension of the per-token tensors (ops whose tokens are independent), when the CPU
// reference of the whole shape would take too long.
struct CheckPlan {
  enum class Kind { Full, Rows } kind = Kind::Full;
  int64_t rows = 0;
  std::vector<std::string> rowInputs;  // inputs sliced along their first dimension
  std::string note;
};

struct BenchCase {
  BenchSpec spec;
  OpAttrs attrs;
  TensorMap inputs;  // every input; in/out tensors hold their initial contents
  // Fewest bytes the op must move: each input it needs read once (for paged caches and the
  // gathered workspace only the rows it references), each output written once.
  double bytes = 0;
  double flops = 0;  // 0 where not meaningful (gathers, copies, selection)
  CheckPlan check;
};

// Valid random inputs for a spec from the op's kernel family (KernelFamily::benchInputs), checked
// against the op, with the reference check planned (BenchCaseBuilder.cpp): the same bytes for a
// seed on every machine; an error names the op, the shape and the bad parameter. "check_rows"
// forces the rows checked, for ops whose rows are independent.
Result<BenchCase> buildCase(const BenchSpec& spec, uint64_t seed);

}  // namespace deepinfer::bench
