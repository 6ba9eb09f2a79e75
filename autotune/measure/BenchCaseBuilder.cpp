// A benchmark case from its spec: the op's kernel family draws the inputs (its benchInputs, from
// a random stream of its own per shape and seed), the case is checked against the op, and the
// reference check is planned: all rows, or rows spread over the first dimension when the family
// says its rows are independent and the CPU reference of the whole shape costs too much.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "BenchCase.h"
#include "deepinfer/BenchInputs.h"
#include "deepinfer/KernelFamily.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/Reference.h"

namespace deepinfer::bench {
namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001B3ull;
  return h;
}

// Rows for the reference check: all, or rows spread over the first dimension when the CPU
// reference of the whole shape costs more than the FLOP budget, or comparing one variant's
// outputs (done for every variant, with a per-element tolerance rule) more than the element
// budget; a spec may force a subset ("check_rows"). The plain-loop references run at about
// 1-4 GFLOP/s on one core.
constexpr double kRefFlopBudget = 4e9;
constexpr double kCompareElementBudget = 8e6;

CheckPlan planRows(const BenchRowSplit& split, BenchParams& p) {
  const int64_t forced = p.get("check_rows", 0);
  const double affordable = std::min(kRefFlopBudget / std::max(split.refFlopsPerRow, 1.0),
                                     kCompareElementBudget / std::max(split.outElementsPerRow, 1.0));
  const int64_t rows = forced > 0 ? forced : std::max<int64_t>(8, int64_t(affordable));
  CheckPlan plan;
  if (rows >= split.rows) return plan;  // Full
  plan.kind = CheckPlan::Kind::Rows;
  plan.rows = rows;
  plan.rowInputs = split.inputs;
  plan.note = fmt::format("{} of {} rows checked, spread evenly (rows are independent; checking all of them "
                          "on the CPU costs too much)",
                          rows, split.rows);
  return plan;
}

}  // namespace

Result<BenchCase> buildCase(const BenchSpec& spec, uint64_t seed) {
  const KernelFamily* family = findKernelFamily(spec.op);
  if (!family) return Error{fmt::format("no kernel family for op '{}'", spec.op)};
  // Each shape gets its own stream of random numbers, the same for a given seed on every machine.
  Rng rng(seed ^ fnv1a(spec.op + "|" + spec.shape));
  BenchParams params(fmt::format("{} [{}]", spec.op, spec.shape), spec.params);
  const HostOpReference reference = runReference;
  BenchInputContext ctx{rng, params, reference};
  BenchCase c;
  c.spec = spec;
  try {
    auto in = family->benchInputs(ctx);
    if (!in.ok()) return in.error();
    c.attrs = std::move(in->attrs);
    c.inputs = std::move(in->inputs);
    c.bytes = in->bytes;
    c.flops = in->flops;
    if (in->rowSplit) c.check = planRows(*in->rowSplit, params);
  } catch (const std::exception& e) {  // the tensor helpers throw on generator bugs
    return Error{fmt::format("{}: building inputs failed: {}", params.where(), e.what())};
  }
  DI_TRY(params.finish());
  if (auto d = describeOp(spec.op, c.attrs, c.inputs); !d.ok())
    return Error{fmt::format("{}: the generated inputs do not fit the op: {}", params.where(), d.error().message)};
  return c;
}

}  // namespace deepinfer::bench
