// The kernel families' rules as the dialect's verifier (KernelRulesInterface): once an op's
// shapes are static, its family checks every rule of spec/ops.md the kernel relies on, and the
// result types must have the shapes the family derives from the inputs.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deepinfer/KernelFamily.h"
#include "deepinfer/OpSignature.h"
#include "ir/DiBridge.h"

namespace deepinfer {
namespace {

using namespace mlir;

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
};

}  // namespace

void registerKernelRules(DialectRegistry& registry) {
  registry.addExtension(+[](MLIRContext*, di::DiDialect* dialect) { dialect->addInterfaces<FamilyRules>(); });
}

}  // namespace deepinfer
