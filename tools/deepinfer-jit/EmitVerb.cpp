// `deepinfer-jit emit`: one op through the pipeline, shown at the stage asked for.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "OpArgs.h"
#include "Verbs.h"
#include "deepinfer/Nvrtc.h"
#include "deepinfer/OpShapes.h"
#include "deepinfer/OpSignature.h"
#include "deepinfer/Pipeline.h"

using namespace deepinfer;

namespace {

std::string resourcesText(const PipelineResult& p, const CompiledUnit& c, const TargetProfile& t) {
  std::string s = fmt::format("op {} on {} ({}), config {{{}}}\n", p.kernel.baseName, t.name, t.archName(),
                              configToString(p.config.config));
  s += fmt::format("estimate: {} threads, {} B smem, ~{} regs, {} CTAs/SM; cap {} B\n",
                   p.config.estimate.threadsPerCta, p.config.estimate.smemBytes,
                   p.config.estimate.regsPerThread, p.config.ctasPerSm, t.smemPerCtaCap);
  s += fmt::format("{:<44} {:>5} {:>8} {:>6} {:>7} {:>7}\n", "entry", "regs", "smem", "stack", "spill-st", "spill-ld");
  for (const auto& [e, r] : c.resources)
    s += fmt::format("{:<44} {:>5} {:>8} {:>6} {:>7} {:>7}\n", e, r.registers, r.smemBytes, r.stackFrame,
                     r.spillStores, r.spillLoads);
  for (const auto& st : p.kernel.plan)
    s += fmt::format("launch {}: grid ({}, {}, {}) block ({}, {}, {}) dynamic smem {}\n", st.entry, st.grid[0],
                     st.grid[1], st.grid[2], st.block[0], st.block[1], st.block[2], st.dynamicSmem);
  if (p.kernel.workspaceBytes > 0 || p.kernel.zeroedBytes > 0)
    s += fmt::format("workspace {} bytes, zeroed {} bytes\n", p.kernel.workspaceBytes, p.kernel.zeroedBytes);
  return s;
}

bool writeFile(const std::filesystem::path& p, const void* data, size_t n) {
  std::ofstream f(p, std::ios::binary);
  f.write(static_cast<const char*>(data), std::streamsize(n));
  return bool(f);
}

}  // namespace

int verbEmit(const std::vector<std::string>& argv) {
  cli::Args args("emit", "emit --op NAME [--shape k=v ...] --target T [--config k=v ...] [--attr k=v ...] "
                         "--stage mlir|cuda|ptx|resources [--all-stages DIR]");
  args.option("op", "NAME", "the op (kv_quant_insert, gather_kcache, ..., mhc_collapse)")
      .option("shape", "k=v", "shape parameter (see --list-shapes)", true)
      .option("target", "T", "sm_80, sm_86, sm_89, sm_90, a preset, or auto (default sm_80)")
      .option("config", "k=v", "fix a config knob instead of the default", true)
      .option("attr", "k=v", "override an attribute", true)
      .option("stage", "S", "mlir (the IR after every pass: what the JIT reads) | cuda | ptx | resources "
                            "(default cuda)")
      .option("all-stages", "DIR", "write every stage (IR per pass, .cu, .ptx, .cubin, resources) to DIR")
      .flag("list-shapes", "print the op's shape parameters and defaults");
  if (int rc = args.parse(argv); rc != 0) return rc < 0 ? 0 : rc;
  if (!args.has("op")) return args.usageError("--op is required");
  const std::string op = args.get("op");
  if (!findOpSignature(op)) {
    std::string names;
    for (const auto& s : opSignatures()) names += (names.empty() ? "" : ", ") + s.op;
    return args.usageError(fmt::format("unknown op '{}' (ops: {})", op, names));
  }
  if (args.has("list-shapes")) {
    for (const auto& sp : opShapeParams(op)) fmt::print("{:<18} {:>8}  {}\n", sp.name, sp.dflt, sp.help);
    return 0;
  }
  std::map<std::string, int64_t> shape, cfgKnobs;
  OpAttrs attrs;
  if (!cli::parseIntPairs(args, "shape", &shape) || !cli::parseIntPairs(args, "config", &cfgKnobs) ||
      !cli::parseAttrPairs(args, "attr", &attrs))
    return 2;
  const std::string stage = args.get("stage", "cuda");
  if (stage != "mlir" && stage != "cuda" && stage != "ptx" && stage != "resources")
    return args.usageError(fmt::format("--stage '{}' is not one of mlir, cuda, ptx, resources", stage));
  auto target = cli::resolveTarget(args.get("target", "sm_80"));
  if (!target.ok()) return fmt::print(stderr, "error: {}\n", target.error().message), 1;
  auto desc = makeOpDesc(op, shape, attrs);
  if (!desc.ok()) return fmt::print(stderr, "error: {}\n", desc.error().message), 1;
  std::optional<KernelConfig> fixed;
  if (!cfgKnobs.empty()) {
    KernelConfig c = findKernelFamily(op) ? findKernelFamily(op)->defaultConfig(*desc, *target) : KernelConfig{};
    for (const auto& [k, v] : cfgKnobs) {
      if (!c.count(k)) {
        std::string known;
        for (const auto& [kk, vv] : c) known += (known.empty() ? "" : ", ") + kk;
        return args.usageError(fmt::format("--config {}: {} has no knob '{}' (knobs: {})", k, op, k, known));
      }
      c[k] = v;
    }
    fixed = c;
  }
  PipelineIr ir;
  auto p = runKernelPipeline(*desc, *target, fixed, &ir);
  if (!p.ok()) return fmt::print(stderr, "error: {}\n", p.error().message), 1;

  const bool needCompile = stage == "ptx" || stage == "resources" || args.has("all-stages");
  CompiledUnit compiled;
  if (needCompile) {
    auto c = compileUnit(p->kernel.unit, p->kernel.baseName + ".cu", target->arch(), /*cubin=*/true);
    if (!c.ok()) return fmt::print(stderr, "error: {}\n", c.error().message), 1;
    compiled = std::move(c.value());
  }
  if (args.has("all-stages")) {
    std::filesystem::path dir = args.get("all-stages");
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    const std::string res = resourcesText(*p, compiled, *target);
    bool ok = writeFile(dir / "0-input.mlir", ir.input.data(), ir.input.size()) &&
              writeFile(dir / "1-specialized.mlir", ir.specialized.data(), ir.specialized.size()) &&
              writeFile(dir / "2-emitted.mlir", ir.emitted.data(), ir.emitted.size()) &&
              writeFile(dir / "kernel.cu", p->kernel.unit.source.data(), p->kernel.unit.source.size()) &&
              writeFile(dir / "kernel.ptx", compiled.ptx.data(), compiled.ptx.size()) &&
              writeFile(dir / "kernel.cubin", compiled.cubin.data(), compiled.cubin.size()) &&
              writeFile(dir / "resources.txt", res.data(), res.size()) &&
              writeFile(dir / "nvrtc.log", compiled.log.data(), compiled.log.size());
    if (!ok) return fmt::print(stderr, "error: cannot write into {}\n", dir.string()), 1;
    fmt::print("wrote {} (0-input.mlir 1-specialized.mlir 2-emitted.mlir kernel.cu kernel.ptx kernel.cubin "
               "resources.txt nvrtc.log)\n", dir.string());
    return 0;
  }
  if (stage == "mlir") fmt::print("{}", ir.emitted);
  else if (stage == "cuda") fmt::print("{}", p->kernel.unit.source);
  else if (stage == "ptx") fmt::print("{}", compiled.ptx);
  else fmt::print("{}", resourcesText(*p, compiled, *target));
  return 0;
}
