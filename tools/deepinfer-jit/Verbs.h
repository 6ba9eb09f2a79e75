// The verbs of deepinfer-jit. Each takes the arguments after the verb and returns the exit
// code: 0 success, 1 failure (message on stderr), 2 usage error.
#pragma once
#include <string>
#include <vector>

namespace deepinfer::cli {

using VerbArgs = std::vector<std::string>;

struct Verb {
  const char* name;
  const char* summary;
  int (*run)(const VerbArgs&);
};

const std::vector<Verb>& verbs();

}  // namespace deepinfer::cli

// Defined one per file (tools/deepinfer-jit/<Name>Verb.cpp).
int verbTargets(const std::vector<std::string>& args);
int verbEmit(const std::vector<std::string>& args);
int verbCompile(const std::vector<std::string>& args);
int verbMakeModel(const std::vector<std::string>& args);
int verbRun(const std::vector<std::string>& args);
int verbRunOp(const std::vector<std::string>& args);
int verbCache(const std::vector<std::string>& args);
int verbTune(const std::vector<std::string>& args);
int verbRoofline(const std::vector<std::string>& args);
int verbShardPlan(const std::vector<std::string>& args);
