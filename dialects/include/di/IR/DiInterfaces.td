#ifndef DI_INTERFACES
#define DI_INTERFACES

include "mlir/IR/OpBase.td"

def Di_KernelOpInterface : OpInterface<"KernelOpInterface"> {
  let cppNamespace = "::mlir::di";
  let description = [{
    A `di` op that lowers to a generated kernel. The interface gives generic passes the op's
    canonical name and its static description (attributes + tensor shapes); candidate
    configs, resource estimates, the template and the launch geometry come from the kernel
    family registered under that name (compiler/kernels), so adding an op touches one place.
  }];
  let methods = [
    InterfaceMethod<"The canonical op name of spec/ops.md (e.g. `gather_kcache`).",
      "::llvm::StringRef", "getKernelOpName", (ins), [{}], [{
        return $_op->getName().stripDialect();
      }]>,
    InterfaceMethod<[{
        The op's tensors by canonical name, in the order of its signature (OpSignature.h);
        an absent optional operand is a null Value.}],
      "::llvm::SmallVector<std::pair<std::string, ::mlir::Value>>", "getNamedOperands", (ins), [{}], [{
        ::llvm::SmallVector<std::pair<std::string, ::mlir::Value>> r;
        const auto* sig = ::deepinfer::findOpSignature($_op->getName().stripDialect().str());
        for (unsigned i = 0; i < sig->inputs.size(); ++i) {
          auto range = $_op.getODSOperands(i);
          r.emplace_back(sig->inputs[i].name, range.empty() ? ::mlir::Value() : *range.begin());
        }
        return r;
      }]>,
    InterfaceMethod<[{
        The kernel family of the op: its candidate configs on a target, resource estimates,
        template instantiation and launch geometry (compiler/kernels).}],
      "const ::deepinfer::KernelFamily*", "getKernelFamily", (ins), [{}], [{
        return ::deepinfer::findKernelFamily($_op->getName().stripDialect().str());
      }]>,
  ];
}

#endif // DI_INTERFACES
