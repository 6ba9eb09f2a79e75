#ifndef DI_DIALECT
#define DI_DIALECT

include "mlir/IR/OpBase.td"

def Di_Dialect : Dialect {
  let name = "di";
  let summary = "The expensive ops of DeepSeek-V4.1 inference, as kernels to specialize";
  let description = [{
    One op per kernel op of docs/ops.md. Operands and results use the canonical tensor names
    of its §11; scalar parameters are attributes. Passes specialize each op for a target
    (`#di.target`) and pick a kernel configuration (`#di.config`).
  }];
  let cppNamespace = "::mlir::di";
  let useDefaultAttributePrinterParser = 1;
  // Discardable `di.*` attributes on any op are checked by name and value.
  let hasOperationAttrVerify = 1;
}

class Di_Op<string mnemonic, list<Trait> traits = []> : Op<Di_Dialect, mnemonic, traits>;

#endif // DI_DIALECT
