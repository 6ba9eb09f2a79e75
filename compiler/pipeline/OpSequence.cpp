#include "deepinfer/OpSequence.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deepinfer/OpSignature.h"
#include "DiTypes.h"
#include "ir/DiBridge.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Passes.h"

namespace deepinfer {
namespace {

using namespace mlir;

// The function of the sequence: an argument for each buffer read before anything writes it, one
// op per step reading each buffer's current value, and every op result returned (so the
// buffer of each value survives the passes as its position in the return).
struct Built {
  func::FuncOp fn;
  std::vector<int> argBuffer;     // buffer of each function argument
  std::vector<int> resultBuffer;  // buffer of each returned value
};

Result<Built> build(OpBuilder& b, ModuleOp module, const OpSequence& seq) {
  const Location loc = b.getUnknownLoc();
  b.setInsertionPointToEnd(module.getBody());
  Built out;
  out.fn = b.create<func::FuncOp>(loc, "sequence", b.getFunctionType({}, {}));
  Block* body = out.fn.addEntryBlock();
  b.setInsertionPointToStart(body);
  std::map<int, Value> current;
  SmallVector<Value> returned;
  auto bufferOf = [&](const SequenceOp& s, const std::string& name) -> Result<int> {
    auto it = s.tensors.find(name);
    if (it == s.tensors.end()) return Error{fmt::format("op sequence: {} has no tensor '{}'", s.op, name)};
    if (it->second < 0 || size_t(it->second) >= seq.buffers.size())
      return Error{fmt::format("op sequence: {} tensor '{}' names buffer {} of {}", s.op, name, it->second,
                               seq.buffers.size())};
    return it->second;
  };
  for (const SequenceOp& s : seq.ops) {
    const OpSignature* sig = findOpSignature(s.op);
    const KernelFamily* fam = findKernelFamily(s.op);
    if (!sig || !fam) return Error{fmt::format("op sequence: no kernel family for op '{}'", s.op)};
    OperationState st(loc, "di." + s.op);
    SmallVector<int32_t> segments;
    OpDesc d;
    d.op = s.op;
    for (const TensorSig& in : sig->inputs) {
      if (!s.tensors.count(in.name)) {
        if (!in.optional) return Error{fmt::format("op sequence: {} needs tensor '{}'", s.op, in.name)};
        segments.push_back(0);
        continue;
      }
      auto buf = bufferOf(s, in.name);
      if (!buf.ok()) return buf.error();
      const std::vector<int64_t>& shape = seq.buffers[size_t(*buf)];
      d.shapes[in.name] = shape;
      auto it = current.find(*buf);
      if (it == current.end()) {
        out.fn.insertArgument(body->getNumArguments(), RankedTensorType::get(shape, diElementType(b, in.dtype)), {}, loc);
        out.argBuffer.push_back(*buf);
        it = current.emplace(*buf, body->getArgument(body->getNumArguments() - 1)).first;
      }
      st.addOperands(it->second);
      segments.push_back(1);
    }
    auto full = completeAttrs(*sig, s.attrs);
    if (!full.ok()) return full.error();
    d.attrs = *full;
    for (const AttrSig& as : sig->attrs) {
      if (!as.isNumber() || !s.attrs.has(as.name)) continue;
      st.addAttribute(as.name, as.kind == AttrKind::Int ? Attribute(b.getI64IntegerAttr(s.attrs.getInt(as.name, 0)))
                                                        : Attribute(b.getF32FloatAttr(float(s.attrs.getFloat(as.name, 0)))));
    }
    if (llvm::is_contained(st.name.getAttributeNames(), b.getStringAttr("operandSegmentSizes")))
      st.addAttribute("operandSegmentSizes", b.getDenseI32ArrayAttr(segments));
    DI_TRY(fam->validate(d));
    const OutputSpec outs = fam->outputs(d);
    std::vector<int> resultBufs;
    for (const TensorSig& o : sig->outputs) {
      auto it = outs.find(o.name);
      if (it == outs.end()) return Error{fmt::format("op sequence: {} gives no shape for '{}'", s.op, o.name)};
      auto buf = bufferOf(s, o.name);
      if (!buf.ok()) return buf.error();
      if (seq.buffers[size_t(*buf)] != it->second.second)
        return Error{fmt::format("op sequence: {} output '{}' has shape [{}]; its buffer is [{}]", s.op, o.name,
                                 fmt::join(it->second.second, ", "), fmt::join(seq.buffers[size_t(*buf)], ", "))};
      st.addTypes(RankedTensorType::get(it->second.second, diElementType(b, it->second.first)));
      resultBufs.push_back(*buf);
    }
    Operation* op = b.create(st);
    for (unsigned i = 0; i < op->getNumResults(); ++i) {
      current[resultBufs[i]] = op->getResult(i);
      returned.push_back(op->getResult(i));
      out.resultBuffer.push_back(resultBufs[i]);
    }
  }
  b.create<func::ReturnOp>(loc, returned);
  out.fn.setType(b.getFunctionType(body->getArgumentTypes(), ValueRange(returned).getTypes()));
  return out;
}

}  // namespace

Result<OpSequence> fuseOpSequence(const OpSequence& seq) {
  DialectRegistry registry;
  registry.insert<di::DiDialect, func::FuncDialect>();
  registerKernelRules(registry);
  MLIRContext ctx(registry, MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  std::string diag;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic& dg) {
    diag += (diag.empty() ? "" : "\n") + dg.str();
    return success();
  });
  OpBuilder b(&ctx);
  OwningOpRef<ModuleOp> module = ModuleOp::create(b.getUnknownLoc());
  auto built = build(b, *module, seq);
  if (!built.ok()) return built.error();
  if (failed(verify(*module))) return Error{fmt::format("op sequence: the ops do not verify: {}", diag)};

  PassManager fusion(&ctx);
  fusion.addPass(di::createDiFuseGatherCombine());
  if (failed(fusion.run(*module))) return Error{diag.empty() ? "op sequence: a fusion pass failed" : diag};

  // Each value's buffer: arguments by position, op results by where the return lists them.
  std::map<void*, int> bufferOf;
  Block& body = built->fn.getBody().front();
  for (unsigned i = 0; i < body.getNumArguments(); ++i) bufferOf[body.getArgument(i).getAsOpaquePointer()] = built->argBuffer[i];
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (unsigned i = 0; i < ret.getNumOperands(); ++i)
    bufferOf[ret.getOperand(i).getAsOpaquePointer()] = built->resultBuffer[i];

  OpSequence out;
  out.buffers = seq.buffers;
  for (Operation& o : body.without_terminator()) {
    auto k = dyn_cast<di::KernelOpInterface>(o);
    if (!k) return Error{fmt::format("op sequence: a pass left a non-kernel op '{}'", o.getName().getStringRef().str())};
    auto desc = opDescFromIR(k, /*requireStatic=*/true);
    if (failed(desc)) return Error{fmt::format("op sequence: {}", diag)};
    const OpSignature* sig = findOpSignature(desc->op);
    SequenceOp s;
    s.op = desc->op;
    s.attrs = desc->attrs;
    for (size_t i = 0; i < sig->inputs.size(); ++i) {
      Value v = k.getOperandAt(unsigned(i));
      if (!v) continue;
      auto it = bufferOf.find(v.getAsOpaquePointer());
      if (it == bufferOf.end())
        return Error{fmt::format("op sequence: {} operand '{}' lost its buffer", s.op, sig->inputs[i].name)};
      s.tensors[sig->inputs[i].name] = it->second;
    }
    for (size_t i = 0; i < sig->outputs.size(); ++i) {
      auto it = bufferOf.find(o.getResult(unsigned(i)).getAsOpaquePointer());
      if (it == bufferOf.end())
        return Error{fmt::format("op sequence: {} result '{}' lost its buffer", s.op, sig->outputs[i].name)};
      s.tensors[sig->outputs[i].name] = it->second;
    }
    out.ops.push_back(std::move(s));
  }
  return out;
}

}  // namespace deepinfer
