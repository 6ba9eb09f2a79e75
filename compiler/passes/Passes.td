#ifndef DI_PASSES
#define DI_PASSES

include "mlir/Pass/PassBase.td"

def DiFuseGatherCombine : Pass<"di-fuse-gather-combine", "::mlir::ModuleOp"> {
  let summary = "Fold combine_topk_swa into the window gather_kcache it indexes";
  let description = [{
    Rewrites a `di.gather_kcache` and a `di.combine_topk_swa` of one block into one
    `di.gather_kcache_combine` (one launch), when the rows index exactly the rows the gather
    writes: both read the same `seq_lens` and `gather_lens` values, the gather's `offset` is
    the combine's `N`, and the combine's `M` is the rows per request of the gather's `out`.
    The combine reads none of the gather's results, so the pair is independent work; the fused
    op takes the place of the later of the two, and the pair is left alone when that would
    reorder anything: a use of the earlier op's results before the later op, or (gather first)
    another use of the gather's `out` operand between them. Ops that already carry a
    `di.config` (chosen for the op alone) are not fused. Run before di-specialize-target.
  }];
  let dependentDialects = ["::mlir::di::DiDialect"];
}

def DiSpecializeTarget : Pass<"di-specialize-target", "::mlir::ModuleOp"> {
  let summary = "Choose kernel configs that fit the module's target";
  let description = [{
    The target is the module's `di.target` attribute; a module without one gets the preset the
    `target` option names (the option may not contradict an attribute that is there). For every
    `di` op: enumerates the candidate configs of its kernel family, keeps those within the
    target's per-CTA shared-memory cap (48 KB on sm_80/sm_86) and register budget as
    `di.candidates` (each with its estimate and occupancy), records how many were dropped
    (`di.dropped_over_cap`), and picks `di.config` by the family's documented default
    heuristic. An op that already carries a `di.config` keeps it; one that breaks the cap is an
    error, never a silent fallback. Shapes must be static.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"sm_80\"",
           "For a module without di.target: sm_80, sm_86, sm_89, sm_90, a100-80gb, rtx3090, h200, ...">,
  ];
  let dependentDialects = ["::mlir::di::DiDialect"];
}

def DiEmitCuda : Pass<"di-emit-cuda", "::mlir::ModuleOp"> {
  let summary = "Instantiate each op's CUDA template for its chosen config";
  let description = [{
    For every `di` op with a `di.config` (in a module with a `di.target`): emits the CUDA C++
    unit that includes the op's template and instantiates it (`di.cuda`), its base name
    (`di.kernel`, derived from the unit's content, never the bare op name) and entries
    (`di.entries`), the launch plan (`di.launch`: entry, grid, block, dynamic shared memory per
    step) and the workspace it needs (`di.workspace_bytes`, when any). The JIT loads and
    launches what these attributes say.
  }];
  let dependentDialects = ["::mlir::di::DiDialect"];
}

#endif // DI_PASSES
