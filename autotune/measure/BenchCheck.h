// Checking a variant's outputs against the C++ reference (deepinfer/Reference.h) by the op's
// accuracy rule (cases/CompareOutputs.h, the rule of its kernel family). The reference runs once per shape, on every row or
// on the rows of the case's check plan; each variant's outputs are compared with it.
#pragma once
#include <string>
#include <vector>

#include "BenchCase.h"

namespace deepinfer::bench {

struct Expected {
  std::vector<int64_t> rows;  // rows compared along the first dimension (empty: all)
  TensorMap tensors;          // the reference's inputs and outputs, of those rows
  double seconds = 0;         // CPU time of the reference
};
Result<Expected> computeExpected(const BenchCase& c);

struct OutputCheck {
  std::string output, metric, detail;
  bool ok = false;
  double maxErr = 0;
};

struct CheckResult {
  bool checked = false;  // false: not compared (the variant failed before, or no reference)
  bool ok = false;
  std::vector<OutputCheck> outputs;
  std::string note;  // e.g. which rows were compared
};

// `actual`: the variant's outputs by name, holding the same rows as `exp`.
CheckResult compareWithExpected(const BenchCase& c, const Expected& exp, const TensorMap& actual);

// `count` rows spread evenly over [0, total), the first and the last included.
std::vector<int64_t> spreadRows(int64_t total, int64_t count);
// Bytes of one slice along the first dimension.
size_t rowBytes(DType dtype, const std::vector<int64_t>& shape);
// The given rows of `t` along its first dimension.
HostTensor selectRows(const HostTensor& t, const std::vector<int64_t>& rows);

}  // namespace deepinfer::bench
