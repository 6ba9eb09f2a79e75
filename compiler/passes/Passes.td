#ifndef DI_PASSES
#define DI_PASSES

include "mlir/Pass/PassBase.td"

def DiSpecializeTarget : Pass<"di-specialize-target"> {
  let summary = "Attach a target and choose kernel configs that fit it";
  let description = [{
    For every `di` op: attaches `di.target`, enumerates the candidate configs of its kernel
    family, keeps those within the target's per-CTA shared-memory cap (48 KB on sm_80/sm_86)
    and register budget as `di.candidates` (each with its occupancy), records how many were
    dropped (`di.dropped_over_cap`), and picks `di.config` by the family's documented default
    heuristic. An op that already carries a `di.config` keeps it; one that breaks the cap is
    an error, never a silent fallback. Shapes must be static.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"sm_80\"",
           "Preset or architecture: sm_80, sm_86, sm_89, sm_90, a100-80gb, rtx3090, h200, ...">,
  ];
  let dependentDialects = ["::mlir::di::DiDialect"];
}

def DiFuseMhc : Pass<"di-fuse-mhc"> {
  let summary = "Fuse mhc_post with the delayed mhc_pre that consumes its residual";
  let description = [{
    `mhc_post(l)` followed by `mhc_pre(l+1)` reading the residual it produced becomes one
    `mhc_fused_post_pre`, when the post's `sqrsum` is unused. The fused op computes the next
    mixes from the bf16 residual it outputs, so fused and unfused paths agree.
  }];
  let dependentDialects = ["::mlir::di::DiDialect"];
}

def DiEmitCuda : Pass<"di-emit-cuda"> {
  let summary = "Instantiate each op's CUDA template for its chosen config";
  let description = [{
    For every `di` op with `di.target` and `di.config`: emits the CUDA C++ unit that includes
    the op's template and instantiates it (`di.cuda`), with entry names derived from the
    content of the specialization (`di.entries`, never the bare op name) and the launch plan.
  }];
  let dependentDialects = ["::mlir::di::DiDialect"];
}

#endif // DI_PASSES
