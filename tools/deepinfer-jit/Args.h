// A small, strict command-line parser for the verbs: `--name value`, `--name=value`, repeatable
// options and boolean flags. Unknown flags are errors (exit code 2).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "deepinfer/Error.h"

namespace deepinfer::cli {

class Args {
 public:
  Args(std::string verb, std::string synopsis) : verb_(std::move(verb)), synopsis_(std::move(synopsis)) {}
  Args& flag(const std::string& name, const std::string& help);
  Args& option(const std::string& name, const std::string& meta, const std::string& help,
               bool repeatable = false);
  // 0: parsed; 2: usage error (printed to stderr); -1: --help printed (caller returns 0).
  int parse(const std::vector<std::string>& argv);
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string get(const std::string& name, const std::string& dflt = "") const;
  std::vector<std::string> getAll(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }
  void printUsage() const;
  // Print "deepinfer-jit <verb>: <msg>" to stderr and return 2 (a usage error).
  int usageError(const std::string& msg) const;

 private:
  struct Spec { std::string meta, help; bool isFlag, repeatable; };
  std::string verb_, synopsis_;
  std::vector<std::pair<std::string, Spec>> specs_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
  const Spec* find(const std::string& name) const;
};

// A thread or job count from `--flag`'s value: a decimal integer in [minValue, kMaxThreads]
// (InputFiles.h); 0, when minValue allows it, means "all hardware threads". On error, prints the
// usage error and returns nullopt (the caller returns 2).
std::optional<int> threadCount(const Args& a, const std::string& flag, int dflt, int minValue);

// Whether a file can be written at `path` (checked before any work, so a long run never ends in
// "cannot write"): its folder exists and is writable, and the path is not a directory. The
// message names `flag` and the reason.
Status checkOutputPath(const std::string& flag, const std::string& path);

// A decimal integer in [minValue, maxValue] from `--flag`'s value; the error names the flag and
// the value ("is not a non-negative integer", "is not a positive integer", or the range).
Result<int64_t> parseInteger(const std::string& flag, const std::string& text, int64_t minValue,
                             int64_t maxValue = INT64_MAX);
// "a,b,c": parseInteger per item.
Result<std::vector<int64_t>> parseIntegerList(const std::string& flag, const std::string& text, int64_t minValue,
                                              int64_t maxValue = INT64_MAX);

// Parse "k=v" pairs (for --shape, --config, --attr). Returns false on a malformed pair.
bool parseKeyValue(const std::string& s, std::string* k, std::string* v);

}  // namespace deepinfer::cli
