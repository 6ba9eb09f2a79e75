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
