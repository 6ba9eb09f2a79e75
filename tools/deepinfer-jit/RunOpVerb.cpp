// `deepinfer-jit run-op`: one op on tensors read from a safetensors file (canonical names of
// docs/ops.md §11), every output written to another; the generated kernel or the C++ reference.
#include <fmt/format.h>

#include "OpArgs.h"
#include "Verbs.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/Reference.h"
#include "model/Safetensors.h"

using namespace deepinfer;

int verbRunOp(const std::vector<std::string>& argv) {
  cli::Args args("run-op", "run-op --op NAME --in inputs.safetensors --out outputs.safetensors [--target T] "
                           "[--config k=v ...] [--attr k=v ...] [--backend cuda|reference]");
  args.option("op", "NAME", "the op (see docs/ops.md §11 for its tensors and attributes)")
      .option("in", "FILE", "input tensors by canonical name (in/out tensors included)")
      .option("out", "FILE", "where to write every output tensor")
      .option("target", "T", "specialization to run: auto (the local GPU, default), sm_80, sm_86, ...")
      .option("config", "k=v", "fix a config knob (cuda backend)", true)
      .option("attr", "k=v", "an attribute of the op (block_size=64, sm_scale=0.0442, ...)", true)
      .option("backend", "B", "cuda (default with a GPU) or reference (the C++ reference)")
      .flag("require-cache-hit", "fail instead of compiling on a kernel-cache miss (also DEEPINFER_JIT_REQUIRE_CACHE_HIT=1)");
  if (int rc = args.parse(argv); rc != 0) return rc < 0 ? 0 : rc;
  for (const char* f : {"op", "in", "out"})
    if (!args.has(f)) return args.usageError(fmt::format("--{} is required", f));
  std::map<std::string, int64_t> knobs;
  OpAttrs attrs;
  if (!cli::parseIntPairs(args, "config", &knobs) || !cli::parseAttrPairs(args, "attr", &attrs)) return 2;
  const std::string op = args.get("op");
  std::string backend = args.get("backend");
  if (backend.empty()) backend = localGpu(0).ok() ? "cuda" : "reference";
  if (backend != "cuda" && backend != "reference")
    return args.usageError(fmt::format("--backend '{}' is not cuda or reference", backend));

  auto tensors = readSafetensorsToHost(args.get("in"));
  if (!tensors.ok()) return fmt::print(stderr, "error: {}\n", tensors.error().message), 1;
  // Only the op's own tensors count; anything else in the file is reported and ignored.
  const OpSignature* sig = findOpSignature(op);
  if (!sig) {
    auto d = describeOp(op, attrs, *tensors);  // names the known ops
    return fmt::print(stderr, "error: {}\n", d.error().message), 1;
  }
  TensorMap io;
  for (const auto& in : sig->inputs)
    if (auto it = tensors->find(in.name); it != tensors->end()) io[in.name] = it->second;
  for (const auto& [name, t] : *tensors)
    if (!io.count(name)) fmt::print(stderr, "note: {} has tensor '{}', which {} does not use\n", args.get("in"), name, op);
  // The op's verifier (dtypes, shapes, attributes of docs/ops.md) before either backend: the
  // reference must not compute an answer for an op the kernels and the dialect reject.
  auto desc = describeOp(op, attrs, io);
  if (!desc.ok()) return fmt::print(stderr, "error: {}\n", desc.error().message), 1;

  if (backend == "reference") {
    auto st = runReference(op, attrs, io);
    if (!st.ok()) return fmt::print(stderr, "error: {}\n", st.error().message), 1;
  } else {
    auto dev = Device::open(0);
    if (!dev.ok()) return fmt::print(stderr, "error: --backend cuda: {}\n", dev.error().message), 1;
    auto target = cli::resolveTarget(args.get("target", "auto"));
    if (!target.ok()) return fmt::print(stderr, "error: {}\n", target.error().message), 1;
    JitOptions jo;
    jo.requireCacheHit = jo.requireCacheHit || args.has("require-cache-hit");
    Jit jit(*dev, jo);
    GpuRunOptions opts;
    if (!knobs.empty()) {
      KernelConfig c = findKernelFamily(op)->defaultConfig(*desc, *target);
      for (const auto& [k, v] : knobs) {
        if (!c.count(k)) return args.usageError(fmt::format("{} has no config knob '{}'", op, k));
        c[k] = v;
      }
      opts.config = c;
    }
    auto r = runOpOnGpu(jit, op, attrs, *target, io, opts);
    if (!r.ok()) return fmt::print(stderr, "error: {}\n", r.error().message), 1;
    fmt::print(stderr, "ran {} on {} ({}) with {{{}}}\n", r->kernel->kernel.baseName, target->name,
               r->kernel->fromPtx ? "PTX" : "cubin", configToString(r->kernel->config.config));
  }
  TensorMap outs;
  for (const auto& o : sig->outputs) outs[o.name] = io.at(o.name);
  auto st = writeSafetensors(args.get("out"), outs);
  if (!st.ok()) return fmt::print(stderr, "error: {}\n", st.error().message), 1;
  std::string names;
  for (const auto& [n, t] : outs) names += fmt::format("{}{} {}", names.empty() ? "" : ", ", n, t.shapeString());
  fmt::print("wrote {} ({})\n", args.get("out"), names);
  return 0;
}
