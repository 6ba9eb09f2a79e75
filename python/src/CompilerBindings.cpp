// The compiler from Python: target presets and the local GPU, an op's shape parameters, emit (one
// op through the pipeline, at the stage asked for) and compile (ops x targets x configs through
// NVRTC and the kernel cache, with their resources). No GPU needed.
#include <fmt/format.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <thread>

#include "Bindings.h"
#include "deepinfer/BinaryCache.h"
#include "deepinfer/Jit.h"
#include "deepinfer/LocalGpu.h"
#include "deepinfer/Nvrtc.h"
#include "deepinfer/OpShapes.h"
#include "deepinfer/OpSignature.h"
#include "deepinfer/Pipeline.h"

namespace deepinfer::py {
namespace {

nb::dict targetDict(const TargetProfile& t) {
  nb::dict d;
  d["name"] = t.name;
  d["arch"] = t.archName();
  d["sm_count"] = t.smCount;
  d["smem_per_cta_cap"] = t.smemPerCtaCap;
  d["smem_per_sm"] = t.facts.smemPerSm;
  d["smem_per_cta_opt_in"] = t.facts.smemPerCtaOptIn;
  d["max_warps_per_sm"] = t.facts.maxWarpsPerSm;
  d["max_ctas_per_sm"] = t.facts.maxCtasPerSm;
  d["l2_bytes"] = t.l2Bytes;
  d["mem_bandwidth_gbs"] = t.memBandwidthGBs;
  d["bf16_tensor_tflops"] = t.bf16TensorTflops;
  if (!t.gpuName.empty()) d["gpu_name"] = t.gpuName;
  if (!t.driverVersion.empty()) d["driver"] = t.driverVersion;
  return d;
}

nb::list targets() {
  nb::list l;
  for (const auto& t : targetPresets()) l.append(targetDict(t));
  return l;
}

nb::dict localGpuInfo(int ordinal) {
  LocalGpuInfo g = take(localGpu(ordinal));
  nb::dict d = targetDict(g.profile);
  d["ordinal"] = g.ordinal;
  d["total_mem_bytes"] = g.totalMemBytes;
  d["compute_capability"] = nb::make_tuple(g.computeMajor, g.computeMinor);
  return d;
}

// A target for the compiler by name: a preset / "sm_XX", or "local" / "auto" for GPU 0's profile.
TargetProfile compileTarget(const std::string& name) {
  if (name == "local" || name == "auto") {
    LocalGpuInfo g = take(localGpu(0));
    return g.profile;  // the pipeline carries it in the module's #di.target
  }
  auto t = findTarget(name);
  if (!t) {
    std::string names;
    for (const auto& p : targetPresets()) names += (names.empty() ? "" : ", ") + p.name;
    throw DiError(fmt::format("unknown target '{}' (known: {}, local)", name, names));
  }
  return *t;
}

nb::list shapeParams(const std::string& op) {
  requireOp(op);
  nb::list l;
  for (const auto& p : opShapeParams(op)) l.append(nb::make_tuple(p.name, p.dflt, p.help));
  return l;
}

OpDesc descFor(const std::string& op, const nb::dict& shapes, const nb::dict& attrs) {
  requireOp(op);
  return take(makeOpDesc(op, intMapFromDict("shape", shapes), attrsFromDict(op, attrs)));
}

std::optional<KernelConfig> fixedConfig(const OpDesc& d, const TargetProfile& t, const nb::dict& knobs) {
  if (nb::len(knobs) == 0) return std::nullopt;
  KernelConfig c = findKernelFamily(d.op)->defaultConfig(d, t);
  for (const auto& [k, v] : intMapFromDict("config", knobs)) {
    if (!c.count(k)) {
      std::string known;
      for (const auto& [kk, vv] : c) known += (known.empty() ? "" : ", ") + kk;
      throw DiError(fmt::format("{} has no config knob '{}' (knobs: {})", d.op, k, known));
    }
    c[k] = v;
  }
  return c;
}

// NVRTC through the kernel cache (the key the JIT and `compile` use for a cubin of this arch);
// without a cache, a plain compile. `hit` says whether the cache had it.
CompiledUnit compileCached(const EmittedKernel& k, int arch, bool useCache, bool* hit) {
  std::optional<BinaryCache> cache;
  if (useCache) {
    auto c = BinaryCache::open();
    if (c.ok()) cache = std::move(c.value());
  }
  auto compile = [&] { return compileUnit(k.unit, k.baseName + ".cu", arch, /*cubin=*/true); };
  bool compiled = false;
  Result<CompiledUnit> r = cache ? cache->getOrCompile(kernelContentKey(k.unit, arch, true),
                                                       fmt::format("{} for sm_{}", k.baseName, arch), compile, false,
                                                       &compiled)
                                 : compile();
  *hit = cache && !compiled;
  return take(std::move(r));
}

// The text `deepinfer-jit emit --stage resources` prints.
std::string resourcesText(const PipelineResult& p, const CompiledUnit& c, const TargetProfile& t) {
  std::string s = fmt::format("op {} on {} ({}), config {{{}}}\n", p.kernel.baseName, t.name, t.archName(),
                              configToString(p.config.config));
  s += fmt::format("estimate: {} threads, {} B smem, ~{} regs, {} CTAs/SM; cap {} B\n",
                   p.config.estimate.threadsPerCta, p.config.estimate.smemBytes, p.config.estimate.regsPerThread,
                   p.config.ctasPerSm, t.smemPerCtaCap);
  s += fmt::format("{:<44} {:>5} {:>8} {:>6} {:>7} {:>7}\n", "entry", "regs", "smem", "stack", "spill-st", "spill-ld");
  for (const auto& [e, r] : c.resources)
    s += fmt::format("{:<44} {:>5} {:>8} {:>6} {:>7} {:>7}\n", e, r.registers, r.smemBytes, r.stackFrame,
                     r.spillStores, r.spillLoads);
  for (const auto& st : p.kernel.plan)
    s += fmt::format("launch {}: grid ({}, {}, {}) block ({}, {}, {}) dynamic smem {}\n", st.entry, st.grid[0],
                     st.grid[1], st.grid[2], st.block[0], st.block[1], st.block[2], st.dynamicSmem);
  return s;
}

nb::object emit(const std::string& op, const nb::dict& shapes, const std::string& target, const std::string& stage,
                const nb::dict& config, const nb::dict& attrs, bool cache) {
  static const std::vector<std::string> kStages = {"mlir", "cuda", "ptx", "resources", "all"};
  if (std::find(kStages.begin(), kStages.end(), stage) == kStages.end())
    throw DiError(fmt::format("stage '{}' is not one of mlir, cuda, ptx, resources, all", stage));
  const TargetProfile t = compileTarget(target);
  const OpDesc d = descFor(op, shapes, attrs);
  PipelineIr ir;
  const PipelineResult p = take(runKernelPipeline(d, t, fixedConfig(d, t, config), &ir));
  if (stage == "mlir") return nb::str(ir.specialized.c_str(), ir.specialized.size());
  if (stage == "cuda") return nb::str(p.kernel.unit.source.c_str(), p.kernel.unit.source.size());
  bool hit = false;
  CompiledUnit c;
  {
    nb::gil_scoped_release nogil;  // reacquired on the way out, also when compileCached throws
    c = compileCached(p.kernel, t.arch(), cache, &hit);
  }
  if (stage == "ptx") return nb::str(c.ptx.c_str(), c.ptx.size());
  if (stage == "resources") return nb::cast(resourcesText(p, c, t));
  nb::dict all;
  all["input_mlir"] = ir.input;
  all["specialized_mlir"] = ir.specialized;
  all["emitted_mlir"] = ir.emitted;
  all["cuda"] = p.kernel.unit.source;
  all["ptx"] = c.ptx;
  all["cubin"] = nb::bytes(reinterpret_cast<const char*>(c.cubin.data()), c.cubin.size());
  all["resources"] = resourcesText(p, c, t);
  all["nvrtc_log"] = c.log;
  all["kernel"] = p.kernel.baseName;
  all["config"] = configToString(p.config.config);
  all["cache_hit"] = hit;
  return all;
}

struct CompileRow {
  std::string op, target, arch, config;
  std::map<std::string, int64_t> shape;
  bool isDefault = false;
  EmittedKernel kernel;
  int unit = -1;  // index into the distinct units
  std::string error;
};

nb::list compileMatrix(const std::vector<std::string>& ops, const std::vector<std::string>& targetNames,
                       const nb::dict& shapes, bool allConfigs, int jobs, bool cache) {
  std::vector<CompileRow> rows;
  std::vector<std::pair<size_t, int>> units;  // distinct (source, arch): a row that has it, the arch
  std::map<std::string, int> unitIndex;
  const auto shape = intMapFromDict("shape", shapes);
  for (const auto& tn : targetNames) {
    const TargetProfile t = compileTarget(tn);
    const size_t firstRow = rows.size();
    for (const auto& op : ops) {
      requireOp(op);
      std::map<std::string, int64_t> own;
      for (const auto& p : opShapeParams(op))
        if (shape.count(p.name)) own[p.name] = shape.at(p.name);
      const OpDesc d = take(makeOpDesc(op, own, {}));
      const Specialization spec = take(specialize(d, t));
      std::vector<std::pair<ConfigChoice, bool>> choices = {{spec.chosen, true}};
      if (allConfigs)
        for (const auto& c : spec.fitting)
          if (c.config != spec.chosen.config) choices.push_back({c, false});
      for (const auto& [choice, isDefault] : choices) {
        CompileRow r{op, t.name, t.archName(), configToString(choice.config), own, isDefault};
        auto k = emitKernel(d, choice.config);
        if (!k.ok()) r.error = k.error().message;
        else r.kernel = std::move(k.value());
        rows.push_back(std::move(r));
      }
    }
    for (size_t i = firstRow; i < rows.size(); ++i) {
      CompileRow& r = rows[i];
      if (!r.error.empty()) continue;
      const std::string key = fmt::format("{}\n{}", t.arch(), r.kernel.unit.source);
      auto [it, fresh] = unitIndex.emplace(key, int(unitIndex.size()));
      r.unit = it->second;
      if (fresh) units.push_back({i, t.arch()});
    }
  }
  // NVRTC on worker threads (GIL released); each distinct unit once.
  std::vector<Result<CompiledUnit>> compiled(units.size(), Error{"not compiled"});
  std::vector<char> hits(units.size(), 0);  // not vector<bool>: written from several threads
  {
    nb::gil_scoped_release nogil;
    std::optional<BinaryCache> disk;
    if (cache)
      if (auto c = BinaryCache::open(); c.ok()) disk = std::move(c.value());
    std::atomic<size_t> next{0};
    auto worker = [&] {
      for (size_t i = next++; i < units.size(); i = next++) {
        const EmittedKernel& k = rows[units[i].first].kernel;
        const int arch = units[i].second;
        auto compile = [&] { return compileUnit(k.unit, k.baseName + ".cu", arch, /*cubin=*/true); };
        bool fresh = false;
        compiled[i] = disk ? disk->getOrCompile(kernelContentKey(k.unit, arch, true),
                                                fmt::format("{} for sm_{}", k.baseName, arch), compile, false, &fresh)
                           : compile();
        hits[i] = disk && !fresh;
      }
    };
    const unsigned n = jobs > 0 ? unsigned(jobs) : std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> pool;
    for (unsigned i = 0; i < std::min<size_t>(n, units.size()); ++i) pool.emplace_back(worker);
    for (auto& th : pool) th.join();
  }
  nb::list out;
  for (const auto& r : rows) {
    nb::dict d;
    d["op"] = r.op;
    d["shape"] = r.shape;
    d["target"] = r.target;
    d["arch"] = r.arch;
    d["config"] = r.config;
    d["default"] = r.isDefault;
    std::string error = r.error;
    if (error.empty()) {
      const Result<CompiledUnit>& c = compiled[size_t(r.unit)];
      if (!c.ok()) {
        error = c.error().message;
      } else {
        uint32_t maxDyn = 0;
        for (const auto& st : r.kernel.plan) maxDyn = std::max(maxDyn, st.dynamicSmem);
        int regs = 0;
        int64_t smem = 0, spills = 0;
        for (const auto& [e, rep] : c->resources) {
          regs = std::max(regs, rep.registers);
          smem = std::max<int64_t>(smem, rep.smemBytes + maxDyn);
          spills += rep.spillStores + rep.spillLoads;
        }
        d["kernel"] = r.kernel.baseName;
        d["registers"] = regs;
        d["smem_bytes"] = smem;
        d["spill_bytes"] = spills;
        d["mma_sync"] = c->ptx.find("mma.sync.aligned.m16n8k16") != std::string::npos;
        d["cache_hit"] = bool(hits[size_t(r.unit)]);
      }
    }
    d["error"] = error.empty() ? nb::none() : nb::cast(error);
    out.append(d);
  }
  return out;
}

}  // namespace

void bindCompiler(nb::module_& m) {
  m.def("targets", &targets, "The target presets (docs/targets.md) and bare sm_XX names.");
  m.def("local_gpu", &localGpuInfo, nb::arg("ordinal") = 0,
        "The local GPU's profile; raises deepinfer.Error saying why there is none.");
  m.def("shape_params", &shapeParams, nb::arg("op"), "An op's shape parameters: (name, default, help).");
  m.def("op_names", [] {
    std::vector<std::string> v;
    for (const auto& s : opSignatures()) v.push_back(s.op);
    return v;
  });
  m.def("emit", &emit, nb::arg("op"), nb::arg("shapes"), nb::arg("target"), nb::arg("stage"), nb::arg("config"),
        nb::arg("attrs"), nb::arg("cache"));
  m.def("compile", &compileMatrix, nb::arg("ops"), nb::arg("targets"), nb::arg("shapes"), nb::arg("all_configs"),
        nb::arg("jobs"), nb::arg("cache"));
  m.def("nvrtc_version", &nvrtcVersionString);
}

}  // namespace deepinfer::py
