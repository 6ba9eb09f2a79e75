#include "mlir/IR/Dominance.h"
#include "passes/Passes.h"

namespace mlir::di {
#define GEN_PASS_DEF_DIFUSEMHC
#include "passes/Passes.h.inc"

namespace {

// post(l) -> pre(l+1) on the residual post produced: one fused op. The post's sqrsum must be
// unused (the fused op recomputes the statistics from its own bf16 output).
struct FuseMhc : impl::DiFuseMhcBase<FuseMhc> {
  void runOnOperation() override {
    SmallVector<std::pair<MhcPostOp, MhcPreOp>> pairs;
    DominanceInfo dom(getOperation());
    getOperation()->walk([&](MhcPostOp post) {
      if (!post.getSqrsum().use_empty()) return;
      for (Operation* user : post.getX().getUsers()) {
        auto pre = dyn_cast<MhcPreOp>(user);
        if (!pre || pre.getX() != post.getX()) continue;
        // The fused op replaces the post in place, so the pre's other inputs must be
        // available there.
        bool available = llvm::all_of(pre->getOperands(), [&](Value v) {
          return v == post.getX() || dom.properlyDominates(v, post);
        });
        if (available) {
          pairs.emplace_back(post, pre);
          return;
        }
      }
    });
    for (auto [post, pre] : pairs) {
      OpBuilder b(post);
      auto fused = b.create<MhcFusedPostPreOp>(
          FusedLoc::get(&getContext(), {post.getLoc(), pre.getLoc()}),
          TypeRange{post.getX().getType(), pre.getLayerInput().getType(), pre.getPre().getType(),
                    pre.getPost().getType(), pre.getComb().getType()},
          post.getFOut(), post.getResidual(), post.getPost(), post.getComb(), pre.getFn(),
          pre.getScale(), pre.getBase(), pre.getPreIn(), pre.getNormWeight(), pre.getRmsEpsAttr(),
          pre.getHcEpsAttr(), pre.getSinkhornItersAttr(), pre.getNormEpsAttr());
      post.getX().replaceAllUsesWith(fused.getX());
      pre.getLayerInput().replaceAllUsesWith(fused.getLayerInput());
      pre.getPre().replaceAllUsesWith(fused.getPre());
      pre.getPost().replaceAllUsesWith(fused.getNextPost());
      pre.getComb().replaceAllUsesWith(fused.getNextComb());
      pre.erase();
      post.erase();
    }
  }
};

}  // namespace
}  // namespace mlir::di
