// The kernel families' rules as the dialect's verifier (KernelRulesInterface): once an op's
// shapes are static, its family checks every rule of docs/ops.md the kernel relies on, and the
// result types must have the shapes the family derives from the inputs.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "deepinfer/KernelFamily.h"
#include "deepinfer/OpSignature.h"
#include "deepinfer/TargetProfile.h"
#include "ir/DiBridge.h"

namespace deepinfer {
namespace {

using namespace mlir;

// The MLIR element type of a signature dtype (ui8 for raw bytes).
Type elementTypeOf(MLIRContext* ctx, DType t) {
  switch (t) {
    case DType::BF16: return BFloat16Type::get(ctx);
    case DType::F32: return Float32Type::get(ctx);
    case DType::I32: return IntegerType::get(ctx, 32);
    case DType::I64: return IntegerType::get(ctx, 64);
    case DType::U8: return IntegerType::get(ctx, 8, IntegerType::Unsigned);
  }
  return Type();
}

struct FamilyRules final : di::KernelRulesInterface {
  using KernelRulesInterface::KernelRulesInterface;

  LogicalResult verifyKernelOp(di::KernelOpInterface op) const override {
    Operation* o = op.getOperation();
    auto desc = opDescFromIR(op, /*requireStatic=*/false);
    if (failed(desc)) return failure();
    for (auto& [name, shape] : desc->shapes)
      for (int64_t s : shape)
        if (s < 0) return success();  // shape rules wait until the shapes are known
    const KernelFamily* fam = findKernelFamily(desc->op);
    if (!fam) return o->emitOpError("has no kernel family registered");
    auto st = fam->validate(*desc);
    if (!st.ok()) return o->emitOpError() << st.error().message;
    const OutputSpec outs = fam->outputs(*desc);
    const OpSignature* sig = findOpSignature(desc->op);
    for (unsigned i = 0; i < sig->outputs.size() && i < o->getNumResults(); ++i) {
      auto it = outs.find(sig->outputs[i].name);
      if (it == outs.end()) continue;
      auto rt = cast<RankedTensorType>(o->getResult(i).getType());
      // The family gives the dtype where it depends on attributes (weight_gemm's `y`).
      if (rt.getElementType() != elementTypeOf(o->getContext(), it->second.first))
        return o->emitOpError() << "result '" << sig->outputs[i].name << "' has type " << rt
                                << " but the op produces " << dtypeName(it->second.first) << " elements";
      const auto& want = it->second.second;
      bool same = rt.getRank() == int64_t(want.size());
      for (size_t k = 0; same && k < want.size(); ++k)
        same = ShapedType::isDynamic(rt.getDimSize(k)) || rt.getDimSize(k) == want[k];
      if (!same)
        return o->emitOpError() << "result '" << sig->outputs[i].name << "' has type " << rt
                                << " but the inputs give shape [" << fmt::format("{}", fmt::join(want, ", "))
                                << "]";
    }
    return success();
  }

  LogicalResult verifyTarget(Operation* op, di::TargetAttr t) const override {
    const int64_t arch = t.getArch();
    auto facts = archFacts(int(arch));
    if (!facts)
      return op->emitError() << "#di.target arch = " << arch << " is not a supported architecture (80, 86, 89, 90)";
    if (t.getName().empty()) return op->emitError() << "#di.target needs a name (a preset, sm_XX or local)";
    if (auto preset = findTarget(t.getName().str()); preset && preset->arch() != arch)
      return op->emitError() << "#di.target name \"" << t.getName() << "\" is an sm_" << preset->arch()
                             << " target, not sm_" << arch;
    auto fact = [&](const char* what, int64_t got, int64_t want) -> LogicalResult {
      if (got == want) return success();
      return op->emitError() << "#di.target " << what << " = " << got << " is not sm_" << arch << "'s (" << want << ")";
    };
    if (failed(fact("smem_per_sm", t.getSmemPerSm(), facts->smemPerSm)) ||
        failed(fact("smem_per_cta_opt_in", t.getSmemPerCtaOptIn(), facts->smemPerCtaOptIn)) ||
        failed(fact("regs_per_sm", t.getRegsPerSm(), facts->regsPerSm)) ||
        failed(fact("max_regs_per_thread", t.getMaxRegsPerThread(), facts->maxRegsPerThread)) ||
        failed(fact("max_warps_per_sm", t.getMaxWarpsPerSm(), facts->maxWarpsPerSm)) ||
        failed(fact("max_ctas_per_sm", t.getMaxCtasPerSm(), facts->maxCtasPerSm)))
      return failure();
    if (t.getSmCount() < 1 || t.getSmCount() > 1024)
      return op->emitError() << "#di.target sm_count = " << t.getSmCount() << " must be in 1..1024";
    if (t.getSmemCap() < 1 || t.getSmemCap() > facts->smemPerCtaOptIn)
      return op->emitError() << "#di.target smem_cap = " << t.getSmemCap() << " must be in 1.." << facts->smemPerCtaOptIn
                             << " (sm_" << arch << "'s per-CTA opt-in maximum)";
    const double bw = t.getMemBandwidthGbs().getValueAsDouble();
    if (t.getL2Bytes() < 0 || !(bw >= 0) || !std::isfinite(bw))
      return op->emitError() << "#di.target l2_bytes = " << t.getL2Bytes() << ", mem_bandwidth_gbs = " << bw
                             << " must be >= 0 (0 = unknown)";
    return success();
  }
};

}  // namespace

void registerKernelRules(DialectRegistry& registry) {
  registry.addExtension(+[](MLIRContext*, di::DiDialect* dialect) { dialect->addInterfaces<FamilyRules>(); });
}

}  // namespace deepinfer
