// di-fuse-gather-combine (Passes.td): gather_kcache + combine_topk_swa over the same lengths ->
// gather_kcache_combine, one launch instead of two.
#include "ir/DiBridge.h"
#include "mlir/IR/Builders.h"
#include "passes/Passes.h"

namespace mlir::di {
#define GEN_PASS_DEF_DIFUSEGATHERCOMBINE
#include "passes/Passes.h.inc"

namespace {

namespace attr = deepinfer::attr;

// `user`, or its ancestor in `block`.
Operation* inBlock(Operation* user, Block* block) { return block->findAncestorOpInBlock(*user); }

// Whether every use of `first`'s results is after `second` (so `first` may move to `second`).
bool usesAllAfter(Operation* first, Operation* second) {
  for (Value v : first->getResults())
    for (Operation* user : v.getUsers()) {
      Operation* u = inBlock(user, first->getBlock());
      if (!u || u == second || !second->isBeforeInBlock(u)) return false;
    }
  return true;
}

int64_t intAttr(Operation* op, StringRef name, int64_t dflt) {
  auto a = op->getAttrOfType<IntegerAttr>(name);
  return a ? a.getInt() : dflt;
}

// The rows the combine builds index exactly the rows this gather writes, and nothing orders
// the two.
bool fusible(GatherKcacheOp g, CombineTopkSwaOp c) {
  if (g->getBlock() != c->getBlock() || g->hasAttr(attr::kConfig) || c->hasAttr(attr::kConfig)) return false;
  if (!g.getGatherLens() || g.getSeqLens() != c.getSeqLens() || g.getGatherLens() != c.getGatherLens()) return false;
  if (g.getCacheFormat() != "fp8_ds_mla") return false;
  if (intAttr(g, "offset", 0) != int64_t(c.getN())) return false;
  auto out = cast<RankedTensorType>(g.getOut().getType());
  if (out.isDynamicDim(1) || out.getDimSize(1) != int64_t(c.getM())) return false;
  const bool gatherFirst = g->isBeforeInBlock(c);
  Operation* first = gatherFirst ? g.getOperation() : c.getOperation();
  Operation* second = gatherFirst ? c.getOperation() : g.getOperation();
  if (!usesAllAfter(first, second)) return false;
  if (gatherFirst)  // the gather updates `out` in place: no one may read it between the two
    for (Operation* user : g.getOut().getUsers()) {
      Operation* u = inBlock(user, g->getBlock());
      if (u && u != g && g->isBeforeInBlock(u) && u->isBeforeInBlock(c)) return false;
    }
  return true;
}

void fuse(GatherKcacheOp g, CombineTopkSwaOp c) {
  Operation* later = g->isBeforeInBlock(c) ? c.getOperation() : g.getOperation();
  OpBuilder b(later);
  MLIRContext* ctx = b.getContext();
  auto i64 = [&](int64_t v) { return IntegerAttr::get(IntegerType::get(ctx, 64), v); };
  OperationState st(FusedLoc::get(ctx, {g.getLoc(), c.getLoc()}), GatherKcacheCombineOp::getOperationName());
  st.addOperands({g.getKCache(), g.getSeqLens(), g.getGatherLens(), g.getBlockTable(), g.getOut(),
                  c.getTopkIndices(), c.getQueryStartLoc()});
  st.addTypes({g.getOutUpdated().getType(), c.getRows().getType(), c.getLens().getType()});
  st.addAttribute("block_size", i64(g.getBlockSize()));
  st.addAttribute("window", i64(c.getWindow()));
  st.addAttribute("ratio", i64(c.getRatio()));
  st.addAttribute("topk", i64(c.getTopk()));
  st.addAttribute("N", i64(c.getN()));
  Operation* fused = b.create(st);
  g.getOutUpdated().replaceAllUsesWith(fused->getResult(0));
  c.getRows().replaceAllUsesWith(fused->getResult(1));
  c.getLens().replaceAllUsesWith(fused->getResult(2));
  g->erase();
  c->erase();
}

struct FuseGatherCombine : impl::DiFuseGatherCombineBase<FuseGatherCombine> {
  void runOnOperation() override {
    // Each combine with the first gather (in block order) it can take; an op is fused once.
    SmallVector<CombineTopkSwaOp> combines;
    getOperation()->walk([&](CombineTopkSwaOp c) { combines.push_back(c); });
    for (CombineTopkSwaOp c : combines) {
      GatherKcacheOp match;
      for (Operation& op : *c->getBlock())
        if (auto g = dyn_cast<GatherKcacheOp>(op); g && fusible(g, c)) {
          match = g;
          break;
        }
      if (match) fuse(match, c);
    }
  }
};

}  // namespace
}  // namespace mlir::di
