#ifndef DI_INTERFACES
#define DI_INTERFACES

include "mlir/IR/OpBase.td"

def Di_KernelOpInterface : OpInterface<"KernelOpInterface"> {
  let cppNamespace = "::mlir::di";
  let description = [{
    A `di` op that lowers to a generated kernel. The interface gives generic passes the op's
    canonical name and its operands by ODS position; the compiler pairs them with the op's
    signature (generated from the same ODS) and asks the kernel family registered under that
    name for candidate configs, resource estimates, the template and the launch geometry. The
    dialect knows nothing of the families.
  }];
  let methods = [
    InterfaceMethod<"The canonical op name of docs/ops.md (e.g. `gather_kcache`).",
      "::llvm::StringRef", "getKernelOpName", (ins), [{}], [{
        return $_op->getName().stripDialect();
      }]>,
    InterfaceMethod<[{
        The operand at ODS position `index` (the order of the op's signature); a null Value
        for an absent optional operand.}],
      "::mlir::Value", "getOperandAt", (ins "unsigned":$index), [{}], [{
        auto range = $_op.getODSOperands(index);
        return range.empty() ? ::mlir::Value() : *range.begin();
      }]>,
  ];
  // Every kernel op is verified the same way (DiDialect.cpp), after its ODS checks.
  let verify = [{ return ::mlir::di::verifyKernelOp($_op); }];
}

#endif // DI_INTERFACES
