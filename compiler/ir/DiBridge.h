// Between the `di` IR and the compiler's MLIR-free types: an op's description for its kernel
// family, target and config attributes, and the kernel rules the compiler registers on the
// dialect. Private to the compiler (passes, pipeline, deepinfer-opt); MLIR stays behind it.
#pragma once
#include "deepinfer/Specialize.h"
#include "di/IR/DiDialect.h"
#include "mlir/IR/DialectRegistry.h"

namespace deepinfer {

// The op's description (static tensor shapes by canonical name, attributes with defaults) for
// its kernel family. With `requireStatic`, a dynamic dimension is an error naming the operand;
// without, it is -1. Errors are emitted on the op.
mlir::FailureOr<OpDesc> opDescFromIR(mlir::di::KernelOpInterface op, bool requireStatic);

// The target as the module's `di.target` attribute, and back (an error at `where` for an arch
// the compiler has no facts for).
mlir::di::TargetAttr targetToAttr(mlir::MLIRContext* ctx, const TargetProfile& t);
mlir::FailureOr<TargetProfile> targetFromAttr(mlir::di::TargetAttr a, mlir::Operation* where);
// The module's target: its `di.target` attribute (an error at the module when there is none).
mlir::FailureOr<TargetProfile> moduleTarget(mlir::Operation* op);

// A config and its resource estimate as `#di.config`, and back.
KernelConfig configFromAttr(mlir::di::ConfigAttr a);
ConfigChoice choiceFromAttr(mlir::di::ConfigAttr a);
mlir::di::ConfigAttr configToAttr(mlir::MLIRContext* ctx, const ConfigChoice& c);

// The attribute names the passes write on each kernel op and the pipeline reads back.
namespace attr {
inline constexpr const char* kTarget = "di.target";              // on the module
inline constexpr const char* kCandidates = "di.candidates";      // #di.config that fit, in order
inline constexpr const char* kDroppedOverCap = "di.dropped_over_cap";
inline constexpr const char* kConfig = "di.config";              // the chosen (or fixed) config
inline constexpr const char* kKernel = "di.kernel";              // the unit's base name
inline constexpr const char* kCuda = "di.cuda";                  // the CUDA unit
inline constexpr const char* kEntries = "di.entries";            // its extern "C" entries
inline constexpr const char* kLaunch = "di.launch";              // the launch plan, in order
inline constexpr const char* kWorkspaceBytes = "di.workspace_bytes";
inline constexpr const char* kZeroedBytes = "di.zeroed_bytes";
}  // namespace attr

// Registers the kernel families' rules (KernelRulesInterface) on the di dialect.
void registerKernelRules(mlir::DialectRegistry& registry);

}  // namespace deepinfer
