#include "SelfTest.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "BenchCheck.h"
#include "BenchKernels.h"
#include "BenchTiming.h"
#include "cases/OpCases.h"
#include "deepinfer/Nvrtc.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/Specialize.h"

namespace deepinfer::bench {
namespace {

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

constexpr int64_t kGatherRowElems = 512;

struct Failures {
  std::vector<std::string> list;
  void add(const std::string& what) { list.push_back(what); }
};

bool allZero(const HostTensor& t) {
  for (uint8_t b : t.bytes)
    if (b) return false;
  return true;
}

bool finiteF32(const HostTensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.ptr<float>()[i])) return false;
  return true;
}

bool finiteBf16(const HostTensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if ((t.ptr<uint16_t>()[i] & 0x7F80) == 0x7F80) return false;  // inf or NaN
  return true;
}

// The reference outputs show that the kernel does all its work on these inputs.
void checkWorkDone(const BenchCase& c, const Expected& e, Failures& f) {
  const std::string& op = c.spec.op;
  const std::string where = fmt::format("{} [{}]", op, c.spec.shape);
  const TensorMap& t = e.tensors;
  if (op == "combine_topk_swa") {
    const int64_t full = c.attrs.getInt("topk", 0) + c.attrs.getInt("window", 0);
    const HostTensor& lens = t.at("lens");
    for (int64_t i = 0; i < lens.numel(); ++i)
      if (lens.ptr<int32_t>()[i] != full)
        return f.add(fmt::format("{}: token {} has {} entries, not a full row of {}", where, i, lens.ptr<int32_t>()[i], full));
  } else if (op == "gather_kcache") {
    // The rows it writes (out's other rows keep their random contents).
    const HostTensor& out = t.at("out");
    const int64_t M = out.dim(1), g = c.inputs.at("gather_lens").ptr<int32_t>()[0];
    const int64_t offset = c.attrs.getInt("offset", 0);
    for (int64_t r = 0; r < out.dim(0); ++r)
      for (int64_t i = (r * M + offset) * kGatherRowElems; i < (r * M + offset + g) * kGatherRowElems; ++i)
        if ((out.ptr<uint16_t>()[i] & 0x7F80) == 0x7F80)
          return f.add(where + ": a gathered row holds NaN/inf (a page that was never written?)");
  } else if (op == "gather_kcache_combine") {
    // Every token's row full (top-k + window), and the window rows each request gathers (at N)
    // finite: out's other rows keep their random contents.
    const int64_t full = c.attrs.getInt("topk", 0) + c.attrs.getInt("window", 0);
    const HostTensor& lens = t.at("lens");
    for (int64_t i = 0; i < lens.numel(); ++i)
      if (lens.ptr<int32_t>()[i] != full)
        return f.add(fmt::format("{}: token {} has {} entries, not a full row of {}", where, i, lens.ptr<int32_t>()[i], full));
    const HostTensor& out = t.at("out");
    const int64_t M = out.dim(1), N = c.attrs.getInt("N", 0);
    for (int64_t r = 0; r < out.dim(0); ++r) {
      const int64_t g = c.inputs.at("gather_lens").ptr<int32_t>()[r];
      for (int64_t i = (r * M + N) * kGatherRowElems; i < (r * M + N + g) * kGatherRowElems; ++i)
        if ((out.ptr<uint16_t>()[i] & 0x7F80) == 0x7F80)
          return f.add(where + ": a gathered row holds NaN/inf (a page that was never written?)");
    }
  } else if (op == "kv_quant_insert") {
    const HostTensor& s = t.at("slot_mapping");
    for (int64_t i = 0; i < s.numel(); ++i)
      if (s.ptr<int64_t>()[i] < 0) return f.add(fmt::format("{}: slot {} is skipped (-1)", where, i));
  } else if (op == "sparse_mla_decode" || op == "sparse_mla_prefill") {
    if (!finiteF32(t.at("lse"))) f.add(where + ": some query has no valid key (lse not finite)");
    if (!finiteBf16(t.at("out"))) f.add(where + ": out holds NaN/inf");
  } else if (op == "indexer_logits") {
    const HostTensor& s = t.at("scores");
    const HostTensor& vis = t.at("visible");
    const int64_t n = s.dim(1);
    for (int64_t r = 0; r < s.dim(0); ++r) {
      int64_t finite = 0;
      for (int64_t j = 0; j < n; ++j) finite += std::isfinite(s.ptr<float>()[r * n + j]) ? 1 : 0;
      if (finite != vis.ptr<int32_t>()[r] || finite == 0)
        return f.add(fmt::format("{}: row {} scores {} positions, visible says {}", where, r, finite, vis.ptr<int32_t>()[r]));
    }
  } else if (op == "topk") {
    const HostTensor& idx = t.at("indices");
    for (int64_t i = 0; i < idx.numel(); ++i)
      if (idx.ptr<int32_t>()[i] < 0) return f.add(fmt::format("{}: a row selects fewer than k entries", where));
  } else if (op == "weight_gemm" || op == "moe_experts") {
    const HostTensor& y = t.at("y");
    if (!(y.dtype == DType::F32 ? finiteF32(y) : finiteBf16(y))) f.add(where + ": y is not finite");
    if (allZero(y)) f.add(where + ": y is all zeros");
  } else {  // mHC
    for (const std::string& name : testing::outputNames(op)) {
      const HostTensor& o = t.at(name);
      if (!(o.dtype == DType::F32 ? finiteF32(o) : finiteBf16(o))) f.add(fmt::format("{}: {} is not finite", where, name));
    }
  }
}

// For a row plan: the subset reference must agree with the same rows of the full reference.
void checkRowSubset(const BenchCase& c, const Expected& subset, Failures& f) {
  BenchCase all = c;
  all.check = CheckPlan{};
  auto full = computeExpected(all);
  if (!full.ok()) return f.add(full.error().message);
  for (const std::string& name : testing::outputNames(c.spec.op)) {
    const HostTensor want = selectRows(full->tensors.at(name), subset.rows);
    const auto rep = testing::compareOutputs(c.spec.op, name, want, subset.tensors.at(name), c.attrs, subset.tensors);
    if (!rep.ok || rep.maxErr != 0)
      f.add(fmt::format("{} [{}]: the row-subset reference differs from the full one: {}", c.spec.op, c.spec.shape,
                        rep.detail));
  }
}

void checkStatistics(Failures& f) {
  const TimingStats odd = summarize({5, 1, 3, 2, 4});
  if (odd.medianUs != 3 || odd.minUs != 1 || odd.maxUs != 5 || odd.p90Us != 5 || odd.samples != 5)
    f.add("summarize: wrong statistics of {5, 1, 3, 2, 4}");
  std::vector<double> v;
  for (int i = 20; i >= 1; --i) v.push_back(i);
  const TimingStats even = summarize(v);
  if (even.medianUs != 10.5 || even.p90Us != 18) f.add("summarize: wrong median/p90 of 1..20");
  if (spreadRows(10, 4) != std::vector<int64_t>{0, 3, 6, 9} || spreadRows(3, 8) != std::vector<int64_t>{0, 1, 2})
    f.add("spreadRows: wrong rows");
}

// The benchmark's own kernels compile for the oldest and a newer target, without spills.
void checkBenchKernels(Failures& f) {
  const std::vector<std::string> entries = {"di_bench_copy", "di_bench_mma", "di_bench_flush", "di_bench_delay"};
  for (int arch : {80, 90}) {
    auto c = compileUnit(CudaUnit{std::string(benchKernelsSource()), entries}, "di_bench_kernels.cu", arch, true);
    if (!c.ok()) {
      f.add(fmt::format("kernels/BenchKernels.cu for sm_{}: {}", arch, c.error().message));
      continue;
    }
    for (const std::string& e : entries) {
      auto it = c->resources.find(e);
      if (it == c->resources.end())
        f.add(fmt::format("kernels/BenchKernels.cu for sm_{}: no entry {}", arch, e));
      else if (it->second.spillStores + it->second.spillLoads > 0)
        f.add(fmt::format("kernels/BenchKernels.cu for sm_{}: {} spills", arch, e));
    }
    if (c->ptx.find("mma.sync.aligned.m16n8k16") == std::string::npos)
      f.add(fmt::format("kernels/BenchKernels.cu for sm_{}: no mma.sync in the PTX", arch));
  }
}

}  // namespace

int runSelfTest(const std::vector<BenchSpec>& specs, uint64_t seed, bool fullSize) {
  Failures f;
  checkStatistics(f);
  checkBenchKernels(f);
  const std::vector<std::string> targets = {"h200", "sm_80", "sm_86"};
  for (const BenchSpec& spec : specs) {
    const size_t before = f.list.size();
    const auto t0 = std::chrono::steady_clock::now();
    auto c = buildCase(spec, seed);
    if (!c.ok()) {
      f.add(c.error().message);
      continue;
    }
    const double buildS = secondsSince(t0);
    const std::string where = fmt::format("{} [{}]", spec.op, spec.shape);
    for (const auto& [name, t] : c->inputs)  // one request: every token maps to request 0
      if (allZero(t) && name != "token_to_req") f.add(fmt::format("{}: input '{}' is all zeros", where, name));
    if (c->bytes <= 0) f.add(where + ": no byte count");
    const bool wantsFlops = spec.op.find("sparse_mla") == 0 || spec.op == "indexer_logits" ||
                            spec.op == "mhc_pre" || spec.op == "mhc_fused_post_pre" || spec.op == "weight_gemm" ||
                            spec.op == "moe_experts";
    if (wantsFlops != (c->flops > 0)) f.add(where + ": FLOPs counted where not meaningful or missing");
    auto d = describeOp(spec.op, c->attrs, c->inputs);
    if (!d.ok()) {
      f.add(where + ": " + d.error().message);
      continue;
    }
    size_t fitting = 0;
    for (const std::string& tn : targets) {
      auto sp = specialize(*d, *findTarget(tn));
      if (!sp.ok()) {
        f.add(fmt::format("{} on {}: {}", where, tn, sp.error().message));
        continue;
      }
      if (tn == "h200") fitting = sp->fitting.size();
      if (auto e = emitKernel(*d, sp->chosen.config); !e.ok())
        f.add(fmt::format("{} on {}: emitting the default failed: {}", where, tn, e.error().message));
    }
    auto e = computeExpected(*c);
    if (!e.ok()) {
      f.add(e.error().message);
      continue;
    }
    checkWorkDone(*c, *e, f);
    if (!fullSize && c->check.kind == CheckPlan::Kind::Rows) checkRowSubset(*c, *e, f);
    fmt::print("{:<8} {:<19} {:<18} inputs {:6.2f} s, reference {:6.2f} s ({}), {:.3g} MB moved, {} h200 candidates\n",
               f.list.size() == before ? "ok" : "FAILED", spec.op, spec.shape, buildS, e->seconds,
               e->rows.empty() ? "all rows" : fmt::format("{} rows", e->rows.size()), c->bytes / 1e6, fitting);
  }
  for (const std::string& s : f.list) fmt::print("FAILED: {}\n", s);
  fmt::print("self-test: {} shapes, {}\n", specs.size(),
             f.list.empty() ? "all checks passed" : fmt::format("{} failure(s)", f.list.size()));
  return f.list.empty() ? 0 : 1;
}

}  // namespace deepinfer::bench
