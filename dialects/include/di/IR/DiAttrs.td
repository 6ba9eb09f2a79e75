#ifndef DI_ATTRS
#define DI_ATTRS

include "di/IR/DiDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

class Di_Attr<string name, string attrMnemonic> : AttrDef<Di_Dialect, name> {
  let mnemonic = attrMnemonic;
}

def Di_TargetAttr : Di_Attr<"Target", "target"> {
  let summary = "The target a module's kernels are specialized for";
  let description = [{
    Set on the module (`di.target`); the passes read the target from here, so a module
    carries everything its kernels are specialized by and no process-wide table is consulted.
    `smem_cap` is the per-CTA shared-memory cap kernels for this target respect (48 KB on
    sm_80/sm_86 by the project's rule; lifted on sm_89/sm_90 profiles); the other limits are
    the architecture's (or the local GPU's) per-SM resources, `l2_bytes` and
    `mem_bandwidth_gbs` the part's (0 = unknown), which default heuristics weigh.
  }];
  let parameters = (ins
    StringRefParameter<"preset, sm_XX or local">:$name,
    "int64_t":$arch,
    "int64_t":$sm_count,
    "int64_t":$smem_cap,
    "int64_t":$smem_per_sm,
    "int64_t":$smem_per_cta_opt_in,
    "int64_t":$regs_per_sm,
    "int64_t":$max_regs_per_thread,
    "int64_t":$max_warps_per_sm,
    "int64_t":$max_ctas_per_sm,
    "int64_t":$l2_bytes,
    "::mlir::FloatAttr":$mem_bandwidth_gbs
  );
  let assemblyFormat = "`<` struct(params) `>`";
  // The architecture facts must be the architecture's (ArchFacts of docs/targets.md), the cap
  // within them, the SM count positive: a hand-edited target cannot promise what no GPU has.
  // The compiler knows the facts, so the dialect asks its kernel rules when it verifies a
  // `di.target` attribute (DiDialect::verifyOperationAttribute).
}

def Di_ConfigAttr : Di_Attr<"Config", "config"> {
  let summary = "One kernel configuration and its resource estimate";
  let description = [{
    `knobs` holds the config's named integers (block sizes, warps, stages, kv splits, ...;
    the fields of the family's typed config); `smem` the shared-memory bytes per CTA,
    `threads` the CTA size, `ctas_per_sm` the occupancy the target allows for it and `regs`
    the family's register estimate per thread.
  }];
  let parameters = (ins
    "::mlir::DictionaryAttr":$knobs,
    "int64_t":$smem,
    "int64_t":$threads,
    "int64_t":$ctas_per_sm,
    "int64_t":$regs
  );
  let assemblyFormat = "`<` struct(params) `>`";
  // Knobs are integers; the estimate's figures are in range.
  let genVerifyDecl = 1;
}

#endif // DI_ATTRS
