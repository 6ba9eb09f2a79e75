// di-tblgen: the dialect's own TableGen backend. `-gen-op-signatures` writes, from DiOps.td,
// the signature of every kernel op as plain C++ data (no MLIR types): its tensors with their
// canonical names, dtypes, ranks and whether they are optional or updated in place, and its
// attributes with their kinds and defaults. The compiler includes the output
// (compiler/kernels/OpSignatures.cpp), so the ODS definition is the only description of an op.
//
// The output is a comma-separated list of aggregate initializers of deepinfer::OpSignature
// (compiler/include/deepinfer/OpSignature.h), in ODS order:
//   {"op", {inputs: {name, DType::X, optional, inOut, {ranks}}...},
//          {outputs: {...}...},
//          {attrs: {name, AttrKind::X, required, numeric default, string default}...}},
#include <map>
#include <set>
#include <string>
#include <vector>

#include "llvm/ADT/STLExtras.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/TableGen/Error.h"
#include "llvm/TableGen/Main.h"
#include "llvm/TableGen/Record.h"
#include "mlir/TableGen/Argument.h"
#include "mlir/TableGen/Attribute.h"
#include "mlir/TableGen/Operator.h"

using llvm::Record;
using llvm::RecordKeeper;
using llvm::raw_ostream;

namespace {

enum class Action { OpSignatures };
llvm::cl::opt<Action> action(
    llvm::cl::desc("What to generate:"),
    llvm::cl::values(clEnumValN(Action::OpSignatures, "gen-op-signatures",
                                "the kernel ops' signatures as C++ data")));

// The Di_TensorOf record behind an operand or result (through Optional<...>).
const Record& tensorDef(const mlir::tblgen::NamedTypeConstraint& v, const Record& op) {
  const Record* def = &v.constraint.getDef();
  if (def->isSubClassOf("Optional")) def = def->getValueAsDef("baseType");
  if (!def->isSubClassOf("Di_TensorOf"))
    llvm::PrintFatalError(&op, "operand/result '" + v.name.str() +
                                   "' is not a Di_Tensor (Di_BF16<[ranks]>, Di_F32<...>, Di_TensorOf<...>)");
  return *def;
}

std::string ranksOf(const Record& tensor) {
  std::string s;
  for (int64_t r : tensor.getValueAsListOfInts("diRanks")) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return "{" + s + "}";
}

std::string tensorInit(llvm::StringRef name, const Record& tensor, bool optional, bool inOut) {
  return llvm::formatv("{{\"{0}\", DType::{1}, {2}, {3}, {4}}", name, tensor.getValueAsString("diDType"),
                       optional ? "true" : "false", inOut ? "true" : "false", ranksOf(tensor))
      .str();
}

// Attribute kind by the ODS attribute it stores.
const char* attrKind(const mlir::tblgen::Attribute& a, const Record& op, llvm::StringRef name) {
  const llvm::StringRef base = a.getBaseAttr().getAttrDefName();
  if (base == "I64Attr" || base == "I32Attr") return "Int";
  if (base == "F32Attr" || base == "F64Attr") return "Float";
  if (base == "StrAttr") return "String";
  llvm::PrintFatalError(&op, "attribute '" + name.str() + "' has kind " + base.str() +
                                 "; the signature knows I64Attr, I32Attr, F32Attr, F64Attr and StrAttr");
}

void emitOp(const Record& def, raw_ostream& os) {
  mlir::tblgen::Operator op(def);
  // Result name -> the operand it updates in place (the result takes the operand's name).
  std::map<std::string, std::string> inPlace;
  std::set<std::string> updated;
  for (const Record* r : def.getValueAsListOfDefs("updatesInPlace")) {
    inPlace[r->getValueAsString("result").str()] = r->getValueAsString("operand").str();
    updated.insert(r->getValueAsString("operand").str());
  }
  os << "    {\"" << op.getOperationName().substr(op.getDialectName().size() + 1) << "\",\n     {";
  for (int i = 0; i < op.getNumOperands(); ++i) {
    const auto& v = op.getOperand(i);
    if (v.isVariadic()) llvm::PrintFatalError(&def, "variadic operands have no canonical name");
    os << (i ? ",\n      " : "") << tensorInit(v.name, tensorDef(v, def), v.isOptional(), updated.count(v.name.str()));
  }
  os << "},\n     {";
  for (int i = 0; i < op.getNumResults(); ++i) {
    const auto& v = op.getResult(i);
    auto it = inPlace.find(v.name.str());
    const std::string name = it == inPlace.end() ? v.name.str() : it->second;
    os << (i ? ",\n      " : "") << tensorInit(name, tensorDef(v, def), false, it != inPlace.end());
  }
  os << "},\n     {";
  bool first = true;
  for (const auto& na : op.getAttributes()) {
    if (na.attr.isDerivedAttr()) continue;
    const char* kind = attrKind(na.attr, def, na.name);
    const bool required = !na.attr.hasDefaultValue() && !na.attr.isOptional();
    std::string number = "0", text = "\"\"";
    if (na.attr.hasDefaultValue()) {
      if (std::string(kind) == "String") text = na.attr.getDefaultValue().str();
      else number = "double(" + na.attr.getDefaultValue().str() + ")";
    }
    os << (first ? "" : ",\n      ")
       << llvm::formatv("{{\"{0}\", AttrKind::{1}, {2}, {3}, {4}}", na.name, kind, required ? "true" : "false",
                        number, text);
    first = false;
  }
  os << "}},\n";
}

bool generate(raw_ostream& os, RecordKeeper& records) {
  os << "// Generated by di-tblgen -gen-op-signatures from the dialect's ODS. Do not edit.\n";
  // In the order of the .td file (the registry's order is by name).
  std::vector<Record*> ops = records.getAllDerivedDefinitions("Di_KernelOp");
  llvm::sort(ops, [](const Record* a, const Record* b) { return a->getID() < b->getID(); });
  for (const Record* def : ops) emitOp(*def, os);
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::ParseCommandLineOptions(argc, argv);
  return llvm::TableGenMain(argv[0], &generate);
}
