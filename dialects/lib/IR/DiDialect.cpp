#include "di/IR/DiDialect.h"

#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"

using namespace mlir;
using namespace mlir::di;

#include "di/IR/DiDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "di/IR/DiAttrs.cpp.inc"

#include "di/IR/DiInterfaces.cpp.inc"

LogicalResult TargetAttr::verify(function_ref<InFlightDiagnostic()> emitError, StringRef name, int64_t arch,
                                 int64_t smCount, int64_t smemCap, int64_t smemPerSm, int64_t regsPerSm,
                                 int64_t maxWarpsPerSm, int64_t maxCtasPerSm) {
  auto facts = deepinfer::archFacts(int(arch));
  if (!facts) return emitError() << "#di.target arch = " << arch << " is not a supported architecture (80, 86, 89, 90)";
  if (name.empty()) return emitError() << "#di.target needs a name (a preset, sm_XX or local)";
  if (auto preset = deepinfer::findTarget(name.str()); preset && preset->arch() != arch)
    return emitError() << "#di.target name \"" << name << "\" is an sm_" << preset->arch() << " target, not sm_" << arch;
  auto fact = [&](const char* what, int64_t got, int64_t want) -> LogicalResult {
    if (got == want) return success();
    return emitError() << "#di.target " << what << " = " << got << " is not sm_" << arch << "'s (" << want << ")";
  };
  if (failed(fact("smem_per_sm", smemPerSm, facts->smemPerSm)) || failed(fact("regs_per_sm", regsPerSm, facts->regsPerSm)) ||
      failed(fact("max_warps_per_sm", maxWarpsPerSm, facts->maxWarpsPerSm)) ||
      failed(fact("max_ctas_per_sm", maxCtasPerSm, facts->maxCtasPerSm)))
    return failure();
  if (smCount < 1 || smCount > 1024) return emitError() << "#di.target sm_count = " << smCount << " must be in 1..1024";
  if (smemCap < 1 || smemCap > facts->smemPerCtaOptIn)
    return emitError() << "#di.target smem_cap = " << smemCap << " must be in 1.." << facts->smemPerCtaOptIn
                       << " (sm_" << arch << "'s per-CTA opt-in maximum)";
  return success();
}

LogicalResult ConfigAttr::verify(function_ref<InFlightDiagnostic()> emitError, DictionaryAttr knobs, int64_t smem,
                                 int64_t threads, int64_t ctasPerSm) {
  for (NamedAttribute na : knobs)
    if (!llvm::isa<IntegerAttr>(na.getValue()))
      return emitError() << "#di.config knob '" << na.getName().getValue() << "' must be an integer, got "
                         << na.getValue();
  if (smem < 0 || threads < 0 || threads > 1024 || ctasPerSm < 0)
    return emitError() << "#di.config smem = " << smem << ", threads = " << threads << ", ctas_per_sm = " << ctasPerSm
                       << ": smem and ctas_per_sm must be >= 0, threads in 0..1024";
  return success();
}

// The discardable attributes the passes attach: each name with the kind of value it holds.
LogicalResult DiDialect::verifyOperationAttribute(Operation* op, NamedAttribute attr) {
  const StringRef name = attr.getName().getValue();
  const Attribute v = attr.getValue();
  static const char* const kKnown = "di.target, di.config, di.candidates, di.dropped_over_cap, di.cuda, di.launch, "
                                    "di.workspace_bytes";
  auto expect = [&](bool ok, const char* what) -> LogicalResult {
    if (ok) return success();
    return op->emitError() << "attribute '" << name << "' must be " << what << ", got " << v;
  };
  auto nonNegativeInt = [&](Attribute a) {
    auto i = llvm::dyn_cast<IntegerAttr>(a);
    return i && i.getType().isInteger(64) && i.getInt() >= 0;
  };
  if (name == "di.target") return expect(llvm::isa<TargetAttr>(v), "a #di.target");
  if (name == "di.config") return expect(llvm::isa<ConfigAttr>(v), "a #di.config");
  if (name == "di.candidates") {
    auto a = llvm::dyn_cast<ArrayAttr>(v);
    return expect(a && llvm::all_of(a, [](Attribute e) { return llvm::isa<ConfigAttr>(e); }), "an array of #di.config");
  }
  if (name == "di.dropped_over_cap" || name == "di.workspace_bytes") return expect(nonNegativeInt(v), "an i64 >= 0");
  if (name == "di.cuda") return expect(llvm::isa<StringAttr>(v), "a string (the emitted CUDA unit)");
  if (name == "di.launch") {
    auto a = llvm::dyn_cast<ArrayAttr>(v);
    return expect(a && llvm::all_of(a,
                                    [](Attribute e) {
                                      auto d = llvm::dyn_cast<DictionaryAttr>(e);
                                      return d && llvm::isa_and_nonnull<StringAttr>(d.get("entry")) &&
                                             llvm::isa_and_nonnull<DenseI64ArrayAttr>(d.get("grid")) &&
                                             llvm::isa_and_nonnull<DenseI64ArrayAttr>(d.get("block"));
                                    }),
                  "an array of launch steps {entry, grid, block, dynamic_smem}");
  }
  return op->emitError() << "unknown attribute '" << name << "' (the di dialect defines " << kKnown << ")";
}

void DiDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "di/IR/DiAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "di/IR/DiOps.cpp.inc"
      >();
}

namespace mlir::di {

TargetAttr targetToAttr(MLIRContext* ctx, const deepinfer::TargetProfile& t) {
  return TargetAttr::get(ctx, t.name, t.arch(), t.smCount, t.smemPerCtaCap, t.facts.smemPerSm,
                         t.facts.regsPerSm, t.facts.maxWarpsPerSm, t.facts.maxCtasPerSm);
}

deepinfer::KernelConfig configFromAttr(ConfigAttr a) {
  deepinfer::KernelConfig c;
  for (NamedAttribute na : a.getKnobs())
    if (auto i = dyn_cast<IntegerAttr>(na.getValue())) c[na.getName().str()] = i.getInt();
  return c;
}

FailureOr<deepinfer::OpDesc> buildOpDesc(KernelOpInterface op, bool requireStatic) {
  Operation* o = op.getOperation();
  const auto* sig = deepinfer::findOpSignature(op.getKernelOpName().str());
  if (!sig) return o->emitOpError("has no kernel signature"), failure();
  deepinfer::OpDesc d;
  d.op = sig->op;
  for (auto& [name, v] : op.getNamedOperands()) {
    if (!v) continue;
    auto t = cast<RankedTensorType>(v.getType());
    std::vector<int64_t> shape;
    for (int64_t s : t.getShape()) {
      if (ShapedType::isDynamic(s)) {
        if (requireStatic)
          return o->emitOpError() << "operand '" << name << "' has a dynamic dimension (" << t
                                  << "); kernels are specialized for static shapes", failure();
        s = -1;
      }
      shape.push_back(s);
    }
    d.shapes[name] = std::move(shape);
  }
  deepinfer::OpAttrs given;
  for (const auto& as : sig->attrs) {
    Attribute a = o->getAttr(as.name);
    if (!a) continue;
    if (auto i = dyn_cast<IntegerAttr>(a)) given.setInt(as.name, i.getInt());
    else if (auto f = dyn_cast<FloatAttr>(a)) given.setFloat(as.name, f.getValueAsDouble());
  }
  auto full = deepinfer::completeAttrs(*sig, given);
  if (!full.ok()) return o->emitOpError(full.error().message), failure();
  d.attrs = *full;
  return d;
}

// The MLIR element type of a signature dtype (ui8 for raw bytes).
static Type elementTypeOf(MLIRContext* ctx, deepinfer::DType t) {
  switch (t) {
    case deepinfer::DType::BF16: return BFloat16Type::get(ctx);
    case deepinfer::DType::F32: return Float32Type::get(ctx);
    case deepinfer::DType::I32: return IntegerType::get(ctx, 32);
    case deepinfer::DType::I64: return IntegerType::get(ctx, 64);
    case deepinfer::DType::U8: return IntegerType::get(ctx, 8, IntegerType::Unsigned);
  }
  return Type();
}

// One verifier for every op: dialect-level attributes here, then the kernel family's rules of
// spec/ops.md once shapes are static (the family's message names the bad value).
static LogicalResult verifyKernelOp(KernelOpInterface op) {
  Operation* o = op.getOperation();
  if (auto fmt = o->getAttrOfType<StringAttr>("cache_format"))
    if (fmt.getValue() != "fp8_ds_mla")
      return o->emitOpError() << "cache_format '" << fmt.getValue()
                              << "' is not supported (supported: 'fp8_ds_mla', 584 bytes per token)";
  if (auto a = o->getAttrOfType<IntegerAttr>("nope_dim"); a && a.getInt() != 448)
    return o->emitOpError() << "nope_dim = " << a.getInt() << "; the kernels need 448 NoPE dims";
  if (auto a = o->getAttrOfType<IntegerAttr>("rope_dim"); a && a.getInt() != 64)
    return o->emitOpError() << "rope_dim = " << a.getInt() << "; the kernels need 64 RoPE dims";
  auto desc = buildOpDesc(op, /*requireStatic=*/false);
  if (failed(desc)) return failure();
  for (auto& [name, shape] : desc->shapes)
    for (int64_t s : shape)
      if (s < 0) return success();  // shape rules wait until the shapes are known
  const deepinfer::KernelFamily* fam = op.getKernelFamily();
  if (!fam) return o->emitOpError("has no kernel family registered");
  auto st = fam->validate(*desc);
  if (!st.ok()) return o->emitOpError() << st.error().message;
  // Result shapes must be what the family derives from the inputs.
  auto outs = fam->outputs(*desc);
  const auto* sig = deepinfer::findOpSignature(desc->op);
  for (unsigned i = 0; i < sig->outputs.size() && i < o->getNumResults(); ++i) {
    auto it = outs.find(sig->outputs[i].name);
    if (it == outs.end()) continue;
    auto rt = cast<RankedTensorType>(o->getResult(i).getType());
    if (rt.getElementType() != elementTypeOf(o->getContext(), it->second.first))
      return o->emitOpError() << "result '" << sig->outputs[i].name << "' has type " << rt << " but the op produces "
                              << deepinfer::dtypeName(it->second.first) << " elements";
    const auto& want = it->second.second;
    bool same = rt.getRank() == int64_t(want.size());
    for (size_t k = 0; same && k < want.size(); ++k)
      same = ShapedType::isDynamic(rt.getDimSize(k)) || rt.getDimSize(k) == want[k];
    if (!same) {
      std::string w = "[";
      for (size_t k = 0; k < want.size(); ++k) w += (k ? ", " : "") + std::to_string(want[k]);
      return o->emitOpError() << "result '" << sig->outputs[i].name << "' has type " << rt
                              << " but the inputs give shape " << w << "]";
    }
  }
  return success();
}

}  // namespace mlir::di

#define GET_OP_CLASSES
#include "di/IR/DiOps.cpp.inc"

#define DI_VERIFY(OpT) \
  LogicalResult OpT::verify() { return verifyKernelOp(cast<KernelOpInterface>(getOperation())); }
DI_VERIFY(KvQuantInsertOp)
DI_VERIFY(GatherKcacheOp)
DI_VERIFY(CombineTopkSwaOp)
DI_VERIFY(SparseMlaPrefillOp)
DI_VERIFY(SparseMlaDecodeOp)
DI_VERIFY(IndexerLogitsOp)
DI_VERIFY(TopkOp)
DI_VERIFY(MhcPreOp)
DI_VERIFY(MhcPostOp)
DI_VERIFY(MhcFusedPostPreOp)
DI_VERIFY(MhcCollapseOp)
DI_VERIFY(WeightGemmOp)
DI_VERIFY(MoeExpertsOp)
