#include "ReportText.h"
#include "BenchReport.h"

#include <fmt/format.h>

#include <cmath>

namespace deepinfer::bench {

Derived derive(const CaseReport& c, const VariantResult& v, const Ceilings& ceil) {
  Derived d;
  d.floor = rooflineFloor(ceil, c.bytes, c.flops);
  d.floorUs = d.floor.us();
  if (v.timing.samples == 0 || v.timing.medianUs <= 0) return d;
  const double us = v.timing.medianUs;
  d.gbs = c.bytes / (us * 1e3);
  d.tflops = c.flops / (us * 1e6);
  d.rooflineFraction = d.floor.fractionOf(us);
  return d;
}

bool rowUsable(const VariantResult& v) {
  return v.error.empty() && v.timing.samples > 0 && (!v.check.checked || v.check.ok);
}

CaseSummary summarizeCase(CaseReport& c) {
  CaseSummary s;
  VariantResult* best = nullptr;
  for (VariantResult& v : c.variants) {
    v.tuned = false;
    if (!v.error.empty()) ++s.errors;
    if (v.check.checked && !v.check.ok) ++s.failedChecks;
    if (v.kind == "sm80-default") s.sm80 = &v;
    if (v.kind == "sm86-default") s.sm86 = &v;
    if (v.kind == "local-default") s.local = &v;
    if (v.kind != "candidate") continue;
    ++s.candidates;
    if (rowUsable(v) && (!best || v.timing.medianUs < best->timing.medianUs)) best = &v;
  }
  if (best) best->tuned = true;
  s.tuned = best;
  if (s.local && rowUsable(*s.local)) {
    for (const VariantResult& v : c.variants) {
      if (v.kind != "candidate" || v.config != s.local->config || !rowUsable(v)) continue;
      s.localRepeat = &v;
      const double a = v.timing.medianUs, b = s.local->timing.medianUs;
      s.repeatSpread = std::fabs(a - b) / std::min(a, b);
      break;
    }
  }
  return s;
}

namespace {

std::string num(double v, int prec = 1) {
  if (v <= 0 || !std::isfinite(v)) return "-";
  return fmt::format("{:.{}f}", v, prec);
}

std::string speedup(const VariantResult* base, const VariantResult* v) {
  if (!base || !v || !rowUsable(*base) || !rowUsable(*v)) return "-";
  return fmt::format("{:.2f}x", base->timing.medianUs / v->timing.medianUs);
}

std::string checkCell(const CaseReport& c, const VariantResult& v) {
  if (!v.error.empty()) return "ERROR";
  if (!v.check.checked) return c.checked ? "-" : "skip";
  if (!v.check.ok) return "FAIL";
  return c.check.kind == CheckPlan::Kind::Rows ? "ok(rows)" : "ok";
}


// A JSON number, or null for "not measured" (0) and non-finite values.
std::string jn(double v, bool zeroIsNull = true) {
  if (!std::isfinite(v) || (zeroIsNull && v == 0)) return "null";
  return fmt::format("{:.6g}", v);
}

std::string jb(bool b) { return b ? "true" : "false"; }

// The bound of a floor as JSON: "copy", "mma", or null when no ceiling applies.
std::string jbound(const RooflineFloor& f) {
  return f.bound() == RooflineFloor::Bound::None ? "null" : js(boundName(f.bound()));
}

// Kernels one launch of the plan ran ("-" when it did not run).
std::string kernelsCell(const VariantResult& v) {
  return v.kernelsPerLaunch > 0 ? std::to_string(v.kernelsPerLaunch) : "-";
}

// Floor time and what bounds it, e.g. "6.97 copy" ("-" without ceilings).
std::string floorCell(const RooflineFloor& f) {
  return f.us() > 0 ? fmt::format("{:.2f} {}", f.us(), boundName(f.bound())) : "-";
}

std::string timingJson(const TimingStats& t) {
  return fmt::format("{{\"samples\": {}, \"median_us\": {}, \"min_us\": {}, \"p90_us\": {}, \"max_us\": {}}}", t.samples,
                     jn(t.medianUs), jn(t.minUs), jn(t.p90Us), jn(t.maxUs));
}

std::string checkJson(const CheckResult& c) {
  std::string outs;
  for (const OutputCheck& o : c.outputs)
    outs += fmt::format("{}{{\"output\": {}, \"ok\": {}, \"max_err\": {}, \"metric\": {}, \"detail\": {}}}",
                        outs.empty() ? "" : ", ", js(o.output), jb(o.ok), jn(o.maxErr, false), js(o.metric),
                        js(o.ok ? "" : o.detail));
  return fmt::format("{{\"checked\": {}, \"ok\": {}, \"note\": {}, \"outputs\": [{}]}}", jb(c.checked),
                     c.checked ? jb(c.ok) : "null", js(c.note), outs);
}

std::string rowJson(const RunInfo& run, const CaseReport& c, const VariantResult& v, const VariantResult* sm80) {
  const Derived d = derive(c, v, run.ceilings);
  const double vsSm80 = sm80 && rowUsable(*sm80) && rowUsable(v) ? sm80->timing.medianUs / v.timing.medianUs : 0;
  const bool timed = rowUsable(v);
  return fmt::format(
      "{{\"op\": {}, \"shape\": {}, \"variant\": {}, \"tuned\": {}, \"target\": {}, \"arch\": {}, \"ptx\": {}, "
      "\"config\": {}, \"error\": {}, \"timing\": {}, \"median_us\": {}, \"min_us\": {}, \"p90_us\": {}, "
      "\"bytes\": {}, \"gbs\": {}, \"flops\": {}, \"tflops\": {}, \"roofline_floor_us\": {}, "
      "\"roofline_bound\": {}, \"roofline_copy_us\": {}, \"roofline_mma_us\": {}, "
      "\"roofline_fraction\": {}, \"speedup_vs_sm80_default\": {}, \"target_us\": {}, \"target_met\": {}, "
      "\"kernels_per_launch\": {}, \"registers\": {}, \"spill_bytes\": {}, \"jit_seconds\": {}, \"compiled\": {}, "
      "\"check\": {}}}",
      js(c.spec.op), js(c.spec.shape), js(v.kind), jb(v.tuned), js(v.target), v.arch, jb(v.ptx), js(v.config),
      v.error.empty() ? "null" : js(v.error), timingJson(v.timing), jn(v.timing.medianUs), jn(v.timing.minUs),
      jn(v.timing.p90Us), jn(c.bytes), jn(d.gbs), jn(c.flops), jn(d.tflops), jn(d.floorUs), jbound(d.floor),
      jn(d.floor.copyUs), jn(d.floor.mmaUs), jn(d.rooflineFraction),
      jn(vsSm80), jn(c.spec.targetUs),
      c.spec.targetUs > 0 && timed ? jb(v.timing.medianUs <= c.spec.targetUs) : "null",
      v.kernelsPerLaunch > 0 ? std::to_string(v.kernelsPerLaunch) : "null",
      v.registers >= 0 ? std::to_string(v.registers) : "null",
      v.spillBytes >= 0 ? std::to_string(v.spillBytes) : "null", jn(v.getSeconds, false), jb(v.compiled),
      checkJson(v.check));
}

}  // namespace

void printTable(const RunInfo& run, std::vector<CaseReport>& cases) {
  fmt::print("\n{} ({}, {} SMs), driver {}, NVRTC {}, commit {}, {}\n", run.gpuName, run.arch, run.smCount,
             run.driver, run.nvrtc, run.commit, run.date);
  fmt::print("ceilings: copy {} GB/s, mma.sync bf16 {} TFLOP/s; device time, L2 flushed, median of {} samples\n",
             num(run.ceilings.copyGBs, 0), num(run.ceilings.mmaTflops, 0), run.samples);
  fmt::print("krnl: kernels one launch of the op's plan runs; floor: the op's bytes at the copy bandwidth or its "
             "FLOPs at the mma.sync rate, whichever is longer (us, and which); roof = floor / median\n");
  const auto header = fmt::format(
      "{:<19} {:<14} {:<14} {:>9} {:>9} {:>9} {:>7} {:>7} {:>4} {:>12} {:>6} {:>7} {:>8} {:>5} {:<8} {}", "op", "shape",
      "variant", "median", "min", "p90", "GB/s", "TFLOP/s", "krnl", "floor", "roof", "vs sm80", "target", "met",
      "check", "config");
  fmt::print("{}\n{}\n", header, std::string(header.size() + 10, '-'));
  for (CaseReport& c : cases) {
    if (!c.error.empty()) {
      fmt::print("{:<19} {:<14} ERROR: {}\n", c.spec.op, c.spec.shape, c.error);
      continue;
    }
    const CaseSummary s = summarizeCase(c);
    const std::pair<const char*, const VariantResult*> shown[] = {
        {"sm80-default", s.sm80}, {"sm86-default", s.sm86}, {"local-default", s.local}, {"tuned", s.tuned}};
    for (const auto& [label, v] : shown) {
      if (!v) continue;
      const Derived d = derive(c, *v, run.ceilings);
      const bool timed = rowUsable(*v);
      const bool judged = c.spec.targetUs > 0 && timed && std::string(label) != "sm80-default" &&
                          std::string(label) != "sm86-default";
      fmt::print("{:<19} {:<14} {:<14} {:>9} {:>9} {:>9} {:>7} {:>7} {:>4} {:>12} {:>6} {:>7} {:>8} {:>5} {:<8} {}\n",
                 c.spec.op, c.spec.shape, label, timed ? num(v->timing.medianUs, 2) : "-",
                 timed ? num(v->timing.minUs, 2) : "-", timed ? num(v->timing.p90Us, 2) : "-", num(d.gbs, 0),
                 num(d.tflops, 1), kernelsCell(*v), floorCell(d.floor),
                 d.rooflineFraction > 0 ? fmt::format("{:.0f}%", 100 * d.rooflineFraction) : "-",
                 speedup(s.sm80, v), c.spec.targetUs > 0 ? fmt::format("<={}", c.spec.targetUs) : "-",
                 judged ? (v->timing.medianUs <= c.spec.targetUs ? "yes" : "NO") : "-", checkCell(c, *v),
                 v->error.empty() ? v->config : v->error.substr(0, 120));
    }
    if (run.showCandidates)
      for (const VariantResult& v : c.variants) {
        if (v.kind != "candidate") continue;
        fmt::print("{:<19} {:<14} {:<14} {:>9} {:>9} {:>9} {:>7} {:>7} {:>4} {:>12} {:>6} {:>7} {:>8} {:>5} {:<8} {}\n",
                   c.spec.op, c.spec.shape, "candidate", rowUsable(v) ? num(v.timing.medianUs, 2) : "-",
                   rowUsable(v) ? num(v.timing.minUs, 2) : "-", rowUsable(v) ? num(v.timing.p90Us, 2) : "-", "-",
                   "-", kernelsCell(v), "-", "-", speedup(s.sm80, &v), "-", "-", checkCell(c, v),
                   v.error.empty() ? v.config : v.error.substr(0, 120));
      }
    for (const VariantResult& v : c.variants) {  // baselines outside the kernel families
      if (v.kind != "cublas-bf16") continue;
      const Derived d = derive(c, v, run.ceilings);
      const VariantResult* best = s.tuned ? s.tuned : s.local;
      fmt::print("{:<19} {:<14} {:<14} {:>9} {:>9} {:>9} {:>7} {:>7} {:>4} {:>12} {:>6} {:>7} {:>8} {:>5} {:<8} {}\n",
                 c.spec.op, c.spec.shape, v.kind, rowUsable(v) ? num(v.timing.medianUs, 2) : "-",
                 rowUsable(v) ? num(v.timing.minUs, 2) : "-", rowUsable(v) ? num(v.timing.p90Us, 2) : "-",
                 num(d.gbs, 0), num(d.tflops, 1), kernelsCell(v), floorCell(d.floor),
                 d.rooflineFraction > 0 ? fmt::format("{:.0f}%", 100 * d.rooflineFraction) : "-", "-", "-", "-",
                 "-", v.error.empty() ? fmt::format("{}; best kernel {}", v.config, speedup(&v, best) + " faster")
                                      : v.error.substr(0, 120));
    }
    if (s.candidates > 0 || s.failedChecks > 0 || s.errors > 0 || c.spec.publicBestUs > 0) {
      std::string line = fmt::format("{:<19} {:<14} {} candidates", "", "", s.candidates);
      if (s.tuned)
        line += fmt::format("; tuned vs sm80 {}, vs sm86 {}, vs local default {}", speedup(s.sm80, s.tuned),
                            speedup(s.sm86, s.tuned), speedup(s.local, s.tuned));
      if (c.spec.publicBestUs > 0) {
        const VariantResult* best = s.tuned ? s.tuned : s.local;
        line += fmt::format("; best public {} us", c.spec.publicBestUs);
        if (best && rowUsable(*best)) line += fmt::format(" ({:.1f}x)", c.spec.publicBestUs / best->timing.medianUs);
      }
      if (s.localRepeat) line += fmt::format("; local default timed twice: {:.1f}% apart", 100 * s.repeatSpread);
      if (s.failedChecks) line += fmt::format("; {} FAILED check(s)", s.failedChecks);
      if (s.errors) line += fmt::format("; {} error(s)", s.errors);
      if (!c.checked) line += "; not checked: " + c.checkNote;
      fmt::print("{}\n", line);
    }
  }
}

std::string toJson(const RunInfo& run, std::vector<CaseReport>& cases) {
  const Ceilings& ce = run.ceilings;
  std::string o = "{\n";
  o += fmt::format("  \"schema\": \"deepinfer-bench/1\",\n  \"date\": {},\n  \"commit\": {},\n  \"mode\": {},\n",
                   js(run.date), js(run.commit), js(run.mode));
  o += fmt::format(
      "  \"gpu\": {{\"name\": {}, \"arch\": {}, \"sm_count\": {}, \"l2_bytes\": {}, \"memory_bytes\": {}, "
      "\"driver\": {}}},\n  \"nvrtc\": {},\n",
      js(run.gpuName), js(run.arch), run.smCount, run.l2Bytes, run.memoryBytes, js(run.driver), js(run.nvrtc));
  o += fmt::format(
      "  \"method\": {{\"timer\": \"CUDA events around one launch of the whole plan, legacy default stream\", "
      "\"samples\": {}, \"warmup\": {}, \"l2_flush_bytes\": {}, \"delay_us\": {}, \"kernels_error\": {}, "
      "\"statistic\": \"median\", \"seed\": {}, "
      "\"bytes\": \"fewest bytes the op must move: each needed input read once (paged caches and the gathered "
      "workspace: only the referenced rows), each output written once\", "
      "\"roofline\": \"floor = the larger of bytes / the measured copy bandwidth (roofline_copy_us) and FLOPs / the "
      "measured mma.sync bf16 rate (roofline_mma_us); roofline_bound names the larger ('copy' or 'mma'); "
      "roofline_fraction = floor / median\"}},\n",
      run.samples, run.warmup, run.flushBytes, jn(run.delayUs, false),
      run.kernelsError.empty() ? "null" : js(run.kernelsError), run.seed);
  o += fmt::format(
      "  \"ceilings\": {{\"copy_gbs\": {}, \"copy_bytes\": {}, \"copy_timing\": {}, \"copy_error\": {}, "
      "\"mma_bf16_tflops\": {}, \"mma_flops\": {}, \"mma_timing\": {}, \"mma_error\": {}}},\n",
      jn(ce.copyGBs), ce.copyBytes, timingJson(ce.copyTiming), ce.copyError.empty() ? "null" : js(ce.copyError),
      jn(ce.mmaTflops), jn(ce.mmaFlops), timingJson(ce.mmaTiming), ce.mmaError.empty() ? "null" : js(ce.mmaError));
  o += fmt::format("  \"jit_compiles\": {},\n  \"total_seconds\": {:.1f},\n", run.compiles, run.seconds);

  std::string summary, rows;
  for (CaseReport& c : cases) {
    const CaseSummary s = summarizeCase(c);
    auto us = [](const VariantResult* v) { return v && rowUsable(*v) ? jn(v->timing.medianUs) : std::string("null"); };
    auto ratio = [](const VariantResult* a, const VariantResult* b) {
      return a && b && rowUsable(*a) && rowUsable(*b) ? jn(a->timing.medianUs / b->timing.medianUs)
                                                      : std::string("null");
    };
    const VariantResult* judged = s.tuned ? s.tuned : s.local;
    const RooflineFloor floor = rooflineFloor(run.ceilings, c.bytes, c.flops);
    auto ofFloor = [&](const VariantResult* v) {
      return v && rowUsable(*v) ? jn(floor.fractionOf(v->timing.medianUs)) : std::string("null");
    };
    const VariantResult* cublas = nullptr;  // weight_gemm's baseline (CublasBaseline.h)
    for (const VariantResult& v : c.variants)
      if (v.kind == "cublas-bf16") cublas = &v;
    summary += fmt::format(
        "{}    {{\"op\": {}, \"shape\": {}, \"params\": {{{}}}, \"bytes\": {}, \"flops\": {}, \"checked\": {}, "
        "\"check_note\": {}, \"build_seconds\": {:.2f}, \"reference_seconds\": {:.2f}, \"error\": {}, "
        "\"sm80_default_us\": {}, \"sm86_default_us\": {}, \"local_default_us\": {}, \"tuned_us\": {}, "
        "\"tuned_config\": {}, \"candidates\": {}, \"failed_checks\": {}, \"errors\": {}, "
        "\"tuned_vs_sm80_default\": {}, \"tuned_vs_sm86_default\": {}, \"tuned_vs_local_default\": {}, "
        "\"local_default_vs_sm80_default\": {}, \"target_us\": {}, \"target_met\": {}, \"public_best_us\": {}, "
        "\"vs_public_best\": {}, \"repeat_spread\": {}, \"cublas_bf16_us\": {}, \"vs_cublas_bf16\": {}, "
        "\"roofline_floor_us\": {}, \"roofline_bound\": {}, \"roofline_copy_us\": {}, \"roofline_mma_us\": {}, "
        "\"sm80_default_roofline_fraction\": {}, \"local_default_roofline_fraction\": {}, "
        "\"tuned_roofline_fraction\": {}}}",
        summary.empty() ? "" : ",\n", js(c.spec.op), js(c.spec.shape),
        [&] {
          std::string p;
          for (const auto& [k, v] : c.spec.params) p += fmt::format("{}{}: {}", p.empty() ? "" : ", ", js(k), v);
          return p;
        }(),
        jn(c.bytes), jn(c.flops), jb(c.checked), js(c.checkNote), c.buildSeconds, c.referenceSeconds,
        c.error.empty() ? "null" : js(c.error), us(s.sm80), us(s.sm86), us(s.local), us(s.tuned),
        s.tuned ? js(s.tuned->config) : "null", s.candidates, s.failedChecks, s.errors, ratio(s.sm80, s.tuned),
        ratio(s.sm86, s.tuned), ratio(s.local, s.tuned), ratio(s.sm80, s.local), jn(c.spec.targetUs),
        c.spec.targetUs > 0 && judged && rowUsable(*judged) ? jb(judged->timing.medianUs <= c.spec.targetUs) : "null",
        jn(c.spec.publicBestUs),
        c.spec.publicBestUs > 0 && judged && rowUsable(*judged) ? jn(c.spec.publicBestUs / judged->timing.medianUs)
                                                                : "null",
        s.localRepeat ? jn(s.repeatSpread, false) : "null", us(cublas), ratio(cublas, judged), jn(floor.us()),
        jbound(floor), jn(floor.copyUs), jn(floor.mmaUs), ofFloor(s.sm80), ofFloor(s.local), ofFloor(s.tuned));
    for (const VariantResult& v : c.variants)
      rows += fmt::format("{}    {}", rows.empty() ? "" : ",\n", rowJson(run, c, v, s.sm80));
  }
  o += "  \"summary\": [\n" + summary + "\n  ],\n";
  o += "  \"rows\": [\n" + rows + "\n  ]\n}\n";
  return o;
}

}  // namespace deepinfer::bench
