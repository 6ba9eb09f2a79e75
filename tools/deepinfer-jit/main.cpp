// deepinfer-jit: the user's tool. Dispatches to one verb per file.
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <string>

#include "Verbs.h"

namespace deepinfer::cli {

const std::vector<Verb>& verbs() {
  static const std::vector<Verb> v = {
      {"targets", "list target presets and the local GPU", verbTargets},
      {"emit", "show one op's specialized IR, CUDA C++, PTX or resource report", verbEmit},
      {"compile", "compile every op x target x candidate config with NVRTC; print resources", verbCompile},
      {"cache", "list, verify, clear, export or import the on-disk kernel + tuning caches", verbCache},
      {"tune", "autotune every kernel the model needs on the local GPU into the tuning cache", verbTune},
      {"roofline", "measure the local GPU's copy bandwidth and mma.sync rate; store them with the tuning data", verbRoofline},
      {"run-op", "run one op on tensors from a safetensors file (kernel or C++ reference)", verbRunOp},
      {"make-model", "write a random-weight test checkpoint (tiny, proxy)", verbMakeModel},
      {"run", "run a model on a prompt (CUDA backend through generated kernels, or the CPU reference)", verbRun},
      {"shard-plan", "show how a model splits over tp x pp GPUs: shards, bytes, traffic, KV capacity", verbShardPlan},
  };
  return v;
}

}  // namespace deepinfer::cli

static void printHelp() {
  fmt::print(
      "deepinfer-jit: JIT kernel generation and runtime for DeepSeek-V4.1 on Ampere and newer\n\n"
      "usage: deepinfer-jit <verb> [options]     (deepinfer-jit <verb> --help for a verb's options)\n\n"
      "verbs:\n");
  for (const auto& v : deepinfer::cli::verbs()) fmt::print("  {:<12} {}\n", v.name, v.summary);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    printHelp();
    return 2;
  }
  const std::string verb = argv[1];
  if (verb == "--help" || verb == "-h" || verb == "help") {
    printHelp();
    return 0;
  }
  if (verb == "--version") {
    fmt::print("deepinfer-jit {}\n", DI_VERSION_STRING);
    return 0;
  }
  for (const auto& v : deepinfer::cli::verbs()) {
    if (verb != v.name) continue;
    // Errors are values in this code base; an exception reaching here (a thread the system
    // refused, an allocation that failed) is still reported as an error, never an abort.
    try {
      return v.run(std::vector<std::string>(argv + 2, argv + argc));
    } catch (const std::exception& e) {
      fmt::print(stderr, "deepinfer-jit {}: internal error: {}\n", verb, e.what());
      return 1;
    }
  }
  if (verb.rfind("-", 0) == 0)
    fmt::print(stderr, "deepinfer-jit: unknown flag '{}' (flags go after a verb; see --help)\n", verb);
  else
    fmt::print(stderr, "deepinfer-jit: unknown verb '{}' (see deepinfer-jit --help)\n", verb);
  return 2;
}
