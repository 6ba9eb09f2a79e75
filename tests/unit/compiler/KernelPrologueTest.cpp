// Programmatic dependent launch (runtime/lib/Jit.cpp, DeviceModule.cpp) lets a kernel start while
// the previous one drains; that is only safe because every kernel the runtime launches that way
// waits for the prior grids before it touches memory another kernel writes: its first statement
// is di::grid_dependency_sync() (templates/common/GridDependency.cuh), or its body calls
// di::grid_dependency_wait() then di::grid_launch_dependents() after a prologue that touches
// only memory no kernel writes (weight_gemm's streaming entries issue their first weight loads
// there; WeightStream.cuh says why that is safe). These tests scan every
// entry of every op family (defaults and candidates, sm_80 / sm_86 / sm_90, each compile shape)
// and every __global__ of the templates (the model kernels), so a new kernel that forgets the
// prologue fails here. Needs no GPU.
#include <gtest/gtest.h>

#include <cctype>
#include <set>
#include <string>
#include <string_view>

#include "deepinfer/EmbeddedTemplates.h"
#include "deepinfer/KernelFamily.h"
#include "deepinfer/Pipeline.h"
#include "deepinfer/ProgrammaticLaunch.h"
#include "deepinfer/Specialize.h"

using namespace deepinfer;

namespace {

constexpr std::string_view kPrologue = "di::grid_dependency_sync();";
constexpr std::string_view kWait = "di::grid_dependency_wait();";
constexpr std::string_view kTrigger = "di::grid_launch_dependents();";

// Every `__global__` function definition in `src`: its name and whether its body starts with
// the prologue (whitespace and comments skipped). Declarations without a body are errors too:
// the runtime launches only what a unit defines.
struct GlobalFn {
  std::string name;
  bool startsWithPrologue = false;  // sync() first, or wait() then the trigger in the body
  bool deferredWait = false;        // the latter
  std::string where;  // the text around it, for the failure message
};

size_t skipSpaceAndComments(std::string_view s, size_t i) {
  while (i < s.size()) {
    if (std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    else if (s.compare(i, 2, "//") == 0) i = s.find('\n', i) == std::string_view::npos ? s.size() : s.find('\n', i);
    else if (s.compare(i, 2, "/*") == 0) i = s.find("*/", i) == std::string_view::npos ? s.size() : s.find("*/", i) + 2;
    else break;
  }
  return i;
}

std::vector<GlobalFn> globalFunctions(std::string_view src) {
  std::vector<GlobalFn> out;
  for (size_t at = src.find("__global__"); at != std::string_view::npos; at = src.find("__global__", at + 1)) {
    // Skip the spelling inside a comment or a preprocessor line (the emulator's #define).
    const size_t lineStart = src.rfind('\n', at) == std::string_view::npos ? 0 : src.rfind('\n', at) + 1;
    const std::string_view before = src.substr(lineStart, at - lineStart);
    if (before.find("//") != std::string_view::npos || before.find('#') != std::string_view::npos) continue;
    GlobalFn f;
    f.where = std::string(src.substr(at, 160));
    // The name is the identifier right before the parameter list (after __launch_bounds__(...)).
    size_t open = src.find('(', at);
    const size_t bounds = src.find("__launch_bounds__", at);
    if (bounds != std::string_view::npos && bounds < open) open = src.find('(', src.find(')', bounds) + 1);
    size_t e = open;
    while (e > 0 && std::isspace(static_cast<unsigned char>(src[e - 1]))) --e;
    size_t b = e;
    while (b > 0 && (std::isalnum(static_cast<unsigned char>(src[b - 1])) || src[b - 1] == '_')) --b;
    f.name = std::string(src.substr(b, e - b));
    const size_t close = src.find(')', open);
    const size_t body = skipSpaceAndComments(src, close + 1);
    if (body < src.size() && src[body] == '{') {
      const size_t first = skipSpaceAndComments(src, body + 1);
      f.startsWithPrologue = src.compare(first, kPrologue.size(), kPrologue) == 0;
      if (!f.startsWithPrologue) {
        // The body's extent (braces balanced), then a wait followed by the trigger inside it, at
        // the body's own level (not inside a nested block, which might not run).
        int depth = 0;
        size_t end = body;
        for (; end < src.size(); ++end) {
          if (src[end] == '{') ++depth;
          if (src[end] == '}' && --depth == 0) break;
        }
        auto topLevel = [&](size_t at) {
          int d = 0;
          for (size_t i = body; i < at; ++i) d += src[i] == '{' ? 1 : src[i] == '}' ? -1 : 0;
          return d == 1;
        };
        const std::string_view text = src.substr(0, end);
        const size_t wait = text.find(kWait, body);
        const size_t trigger = wait == std::string_view::npos ? wait : text.find(kTrigger, wait);
        f.deferredWait = wait != std::string_view::npos && trigger != std::string_view::npos && topLevel(wait) &&
                         topLevel(trigger);
        f.startsWithPrologue = f.deferredWait;
      }
    }
    out.push_back(f);
  }
  return out;
}

// Fails unless every entry of `u` is defined in its source and every __global__ there starts
// with the prologue.
void expectEveryEntryWaits(const CudaUnit& u, const std::string& what) {
  std::set<std::string> defined;
  for (const GlobalFn& f : globalFunctions(u.source)) {
    defined.insert(f.name);
    EXPECT_TRUE(f.startsWithPrologue) << what << ": " << f.name << " does not start with " << kPrologue << ":\n"
                                      << f.where;
  }
  for (const std::string& e : u.entries) EXPECT_TRUE(defined.count(e)) << what << ": entry " << e << " not found";
}

}  // namespace

TEST(KernelPrologue, TheScannerFindsAMissingPrologue) {
  const std::string good =
      "extern \"C\" __global__ void __launch_bounds__(128, 2) k1(const P p) {\n  // why\n  "
      "di::grid_dependency_sync();\n  run(p);\n}\n";
  const std::string bad = "extern \"C\" __global__ void __launch_bounds__(64) k2(const P p) { run(p); "
                          "di::grid_dependency_sync(); }\n";
  const std::string late = "extern \"C\" __global__ void k3(const P p)\n{\n  int x = p.a;\n  di::grid_dependency_sync();\n}\n";
  // A wait after an independent prologue, then the trigger: accepted.
  const std::string deferred = "extern \"C\" __global__ void k4(const P p) {\n  const K k(p);\n  "
                               "di::grid_dependency_wait();\n  di::grid_launch_dependents();\n  k.run(p);\n}\n";
  // A wait without the trigger, the trigger before the wait, a wait inside a branch, none at all.
  const std::string noTrigger = "extern \"C\" __global__ void k5(const P p) { const K k(p); "
                                "di::grid_dependency_wait(); k.run(p); }\n";
  const std::string swapped = "extern \"C\" __global__ void k6(const P p) { di::grid_launch_dependents(); "
                              "di::grid_dependency_wait(); run(p); }\n";
  const std::string branch = "extern \"C\" __global__ void k7(const P p) { if (p.a) { di::grid_dependency_wait(); "
                             "di::grid_launch_dependents(); } run(p); }\n";
  const std::string none = "extern \"C\" __global__ void k8(const P p) { run(p); }\n"
                           "extern \"C\" __global__ void k9(const P p) { di::grid_dependency_wait(); }\n";
  auto fs = globalFunctions(good + bad + late + deferred + noTrigger + swapped + branch + none);
  ASSERT_EQ(fs.size(), 9u);
  EXPECT_EQ(fs[3].name, "k4");
  EXPECT_TRUE(fs[3].startsWithPrologue);
  EXPECT_TRUE(fs[3].deferredWait);
  for (size_t i = 4; i < 9; ++i) EXPECT_FALSE(fs[i].startsWithPrologue) << fs[i].name;
  // k9: a wait with no trigger (the scan stops at its own body, not at the next kernel).
  EXPECT_EQ(fs[8].name, "k9");
  EXPECT_EQ(fs[0].name, "k1");
  EXPECT_TRUE(fs[0].startsWithPrologue);
  EXPECT_EQ(fs[1].name, "k2");
  EXPECT_FALSE(fs[1].startsWithPrologue);
  EXPECT_EQ(fs[2].name, "k3");
  EXPECT_FALSE(fs[2].startsWithPrologue);
}

TEST(KernelPrologue, EveryEntryOfEveryFamilyWaitsFirst) {
  int units = 0, entries = 0;
  for (const KernelFamily* f : allKernelFamilies()) {
    std::set<std::string> ops;
    for (const char* tn : {"sm_80", "sm_86", "sm_90"}) {
      const TargetProfile t = *findTarget(tn);
      for (const auto& [shapeName, params] : f->compileShapes()) {
        ShapeParams p;
        for (const ShapeParam& sp : f->shapeParams()) p[sp.name] = sp.dflt;
        for (const auto& [k, v] : params) p[k] = v;
        const OpDesc d = f->describe(p);
        std::vector<KernelConfig> configs = f->candidates(d, t);
        configs.push_back(f->defaultConfig(d, t));
        for (const KernelConfig& c : configs) {
          auto u = f->emit(c, d, "di_k");
          const std::string what = f->opName() + " " + tn + " " + shapeName + " {" + configToString(c) + "}";
          ASSERT_TRUE(u.ok()) << what << ": " << u.error().message;
          expectEveryEntryWaits(*u, what);
          ++units;
          entries += int(u->entries.size());
        }
      }
    }
  }
  EXPECT_GT(units, 100);
  EXPECT_GE(entries, units);
}

TEST(KernelPrologue, ThePipelineEmitsTheWaitingEntries) {
  // What the JIT compiles comes from di-emit-cuda: the same check on the pipeline's unit.
  const TargetProfile t = *findTarget("sm_90");
  for (const KernelFamily* f : allKernelFamilies()) {
    ShapeParams p;
    for (const ShapeParam& sp : f->shapeParams()) p[sp.name] = sp.dflt;
    auto r = runKernelPipeline(f->describe(p), t);
    ASSERT_TRUE(r.ok()) << f->opName() << ": " << r.error().message;
    expectEveryEntryWaits(r->kernel.unit, f->opName() + " (pipeline)");
  }
}

TEST(KernelPrologue, EveryTemplateKernelWaitsFirst) {
  // The model kernels (templates/model) and any __global__ a template defines itself.
  int kernels = 0;
  for (const EmbeddedFile& file : embeddedTemplates())
    for (const GlobalFn& f : globalFunctions(file.contents)) {
      ++kernels;
      EXPECT_TRUE(f.startsWithPrologue) << file.path << ": " << f.name << " does not start with " << kPrologue;
    }
  EXPECT_GE(kernels, 23);  // the model kernels
}

TEST(KernelPrologue, TheWaitIsGuardedToSm90) {
  // Compiled below sm_90 the helper is empty (those targets have no griddepcontrol), so the
  // runtime must never launch such code with the attribute (ProgrammaticLaunchDecision below).
  for (const EmbeddedFile& file : embeddedTemplates()) {
    if (file.path != "common/GridDependency.cuh") continue;
    const std::string_view s = file.contents;
    // Each instruction inside a guard (the nearest #if before it is the sm_90 one, and no #endif
    // between them); sync() calls the wait before the trigger.
    constexpr std::string_view kGuard = "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900";
    for (std::string_view insn : {"griddepcontrol.wait;", "griddepcontrol.launch_dependents;"}) {
      const size_t at = s.find(insn);
      ASSERT_NE(at, std::string_view::npos) << insn;
      const size_t guard = s.rfind("#if", at);
      ASSERT_NE(guard, std::string_view::npos) << insn;
      EXPECT_EQ(s.compare(guard, kGuard.size(), kGuard), 0) << insn << " is not guarded to sm_90";
      EXPECT_EQ(s.find("#endif", guard), s.find("#endif", at)) << insn;
      EXPECT_EQ(s.find(insn, at + 1), std::string_view::npos) << insn << " appears twice";
    }
    const size_t sync = s.find("void grid_dependency_sync()");
    ASSERT_NE(sync, std::string_view::npos);
    const size_t wait = s.find("grid_dependency_wait();", sync), trigger = s.find("grid_launch_dependents();", sync);
    ASSERT_NE(wait, std::string_view::npos);
    ASSERT_NE(trigger, std::string_view::npos);
    EXPECT_LT(wait, trigger) << "the wait must come before the trigger";
    return;
  }
  FAIL() << "common/GridDependency.cuh is not among the embedded templates";
}

TEST(ProgrammaticLaunchDecision, OnlySm90CodeOnASm90GpuOnARealStreamWithTheSwitchOn) {
  const ProgrammaticLaunchQuery yes{true, true, 90, 90, false};
  EXPECT_TRUE(useProgrammaticLaunch(yes));
  EXPECT_TRUE(useProgrammaticLaunch({true, true, 100, 100, false}));
  EXPECT_TRUE(useProgrammaticLaunch({true, true, 90, 100, false}));  // sm_90 PTX on a newer GPU
  auto with = [&](auto change) {
    ProgrammaticLaunchQuery q = yes;
    change(q);
    return useProgrammaticLaunch(q);
  };
  EXPECT_FALSE(with([](auto& q) { q.enabled = false; }));      // DEEPINFER_PDL=0 / --pdl off
  EXPECT_FALSE(with([](auto& q) { q.entryWaits = false; }));   // benchmark / test kernels
  EXPECT_FALSE(with([](auto& q) { q.compiledArch = 80; }));    // sm_80 PTX on the H200
  EXPECT_FALSE(with([](auto& q) { q.compiledArch = 86; }));
  EXPECT_FALSE(with([](auto& q) { q.compiledArch = 89; }));
  EXPECT_FALSE(with([](auto& q) { q.deviceArch = 89; }));      // an Ada or Ampere GPU
  EXPECT_FALSE(with([](auto& q) { q.deviceArch = 80; }));
  EXPECT_FALSE(with([](auto& q) { q.legacyStream = true; }));  // the legacy default stream
  EXPECT_EQ(describeProgrammaticLaunch(true, 90, 90), "on");
  EXPECT_NE(describeProgrammaticLaunch(true, 80, 90).find("sm_80"), std::string::npos);
  EXPECT_NE(describeProgrammaticLaunch(true, 86, 86).find("off"), std::string::npos);
  EXPECT_NE(describeProgrammaticLaunch(false, 90, 90).find("off"), std::string::npos);
}

TEST(ProgrammaticLaunchDecision, TheEnvironmentSwitch) {
  const char* old = std::getenv("DEEPINFER_PDL");
  const std::string saved = old ? old : "";
  for (const char* off : {"0", "off", "false"}) {
    setenv("DEEPINFER_PDL", off, 1);
    EXPECT_FALSE(programmaticLaunchDefault()) << off;
  }
  setenv("DEEPINFER_PDL", "1", 1);
  EXPECT_TRUE(programmaticLaunchDefault());
  unsetenv("DEEPINFER_PDL");
  EXPECT_TRUE(programmaticLaunchDefault());
  if (old) setenv("DEEPINFER_PDL", saved.c_str(), 1);
}
