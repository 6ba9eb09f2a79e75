#include "Args.h"

#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <cstdio>
#include <cstdlib>

#include "deepinfer/InputFiles.h"

namespace deepinfer::cli {

Args& Args::flag(const std::string& name, const std::string& help) {
  specs_.push_back({name, Spec{"", help, true, false}});
  return *this;
}

Args& Args::option(const std::string& name, const std::string& meta, const std::string& help, bool rep) {
  specs_.push_back({name, Spec{meta, help, false, rep}});
  return *this;
}

const Args::Spec* Args::find(const std::string& name) const {
  for (const auto& [n, s] : specs_)
    if (n == name) return &s;
  return nullptr;
}

int Args::usageError(const std::string& msg) const {
  fmt::print(stderr, "deepinfer-jit {}: {}\n(see deepinfer-jit {} --help)\n", verb_, msg, verb_);
  return 2;
}

int Args::parse(const std::vector<std::string>& argv) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--help" || a == "-h") {
      printUsage();
      return -1;
    }
    if (a.rfind("--", 0) != 0) {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    bool inlineValue = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inlineValue = true;
    }
    const Spec* s = find(name);
    if (!s) return usageError(fmt::format("unknown flag '--{}'", name));
    if (s->isFlag) {
      if (inlineValue) return usageError(fmt::format("flag '--{}' takes no value", name));
      values_[name].push_back("1");
      continue;
    }
    if (!inlineValue) {
      if (i + 1 >= argv.size()) return usageError(fmt::format("'--{}' needs a value ({})", name, s->meta));
      value = argv[++i];
    }
    if (!s->repeatable && values_.count(name))
      return usageError(fmt::format("'--{}' given twice", name));
    values_[name].push_back(value);
  }
  return 0;
}

std::string Args::get(const std::string& name, const std::string& dflt) const {
  auto it = values_.find(name);
  return it == values_.end() ? dflt : it->second.back();
}

std::vector<std::string> Args::getAll(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

void Args::printUsage() const {
  fmt::print("usage: deepinfer-jit {}\n\n", synopsis_);
  for (const auto& [n, s] : specs_) {
    std::string left = s.isFlag ? fmt::format("--{}", n) : fmt::format("--{} {}", n, s.meta);
    fmt::print("  {:<28} {}{}\n", left, s.help, s.repeatable ? " (repeatable)" : "");
  }
}

Result<int64_t> parseInteger(const std::string& flag, const std::string& text, int64_t minValue, int64_t maxValue) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < minValue || v > maxValue) {
    const std::string what = maxValue != INT64_MAX ? fmt::format("an integer in [{}, {}]", minValue, maxValue)
                             : minValue == 0      ? std::string("a non-negative integer")
                             : minValue == 1      ? std::string("a positive integer")
                                                  : fmt::format("an integer >= {}", minValue);
    return Error{fmt::format("--{}: '{}' is not {}", flag, text, what)};
  }
  return int64_t(v);
}

Result<std::vector<int64_t>> parseIntegerList(const std::string& flag, const std::string& text, int64_t minValue,
                                              int64_t maxValue) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    auto v = parseInteger(flag, text.substr(start, comma == std::string::npos ? std::string::npos : comma - start),
                          minValue, maxValue);
    if (!v.ok()) return v.error();
    out.push_back(*v);
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

std::optional<int> threadCount(const Args& a, const std::string& flag, int dflt, int minValue) {
  if (!a.has(flag)) return dflt;
  const std::string v = a.get(flag);
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || n < minValue || n > kMaxThreads) {
    a.usageError(fmt::format("--{}: '{}' is not a thread count ({}..{}{})", flag, v, minValue, kMaxThreads,
                             minValue == 0 ? "; 0 = all hardware threads" : ""));
    return std::nullopt;
  }
  return int(n);
}

Status checkOutputPath(const std::string& flag, const std::string& path) {
  if (path.empty()) return Error{fmt::format("{}: the output path is empty", flag)};
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return Error{fmt::format("{} {}: is a directory, not a file", flag, path)};
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Error{fmt::format("{} {}: the folder {} does not exist", flag, path, dir)};
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return Error{fmt::format("{} {}: the folder {} is not writable: {}", flag, path, dir, std::strerror(errno))};
  if (::access(path.c_str(), F_OK) == 0 && ::access(path.c_str(), W_OK) != 0)
    return Error{fmt::format("{} {}: exists and is not writable", flag, path)};
  return {};
}

bool parseKeyValue(const std::string& s, std::string* k, std::string* v) {
  auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  *k = s.substr(0, eq);
  *v = s.substr(eq + 1);
  return !v->empty();
}

}  // namespace deepinfer::cli
