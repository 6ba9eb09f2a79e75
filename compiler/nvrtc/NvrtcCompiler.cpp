#include <fmt/format.h>
#include <nvrtc.h>

#include <regex>
#include <sstream>

#include "deepinfer/EmbeddedTemplates.h"
#include "deepinfer/Nvrtc.h"
#include "deepinfer/Specialize.h"

namespace deepinfer {

std::vector<std::string> nvrtcOptions(int arch, bool cubin, bool fmad) {
  std::vector<std::string> o = {
      fmt::format("--gpu-architecture={}_{}", cubin ? "sm" : "compute", arch),
      "-std=c++17",
      fmad ? "--fmad=true" : "--fmad=false",
      "-lineinfo",
  };
  if (cubin) o.push_back("--ptxas-options=-v");
  return o;
}

std::string nvrtcVersionString() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return fmt::format("{}.{}", major, minor);
}

std::map<std::string, ResourceReport> parsePtxasReport(const std::string& log) {
  std::map<std::string, ResourceReport> out;
  static const std::regex kFunc(R"(Function properties for (\S+))");
  static const std::regex kCompiling(R"(Compiling entry function '([^']+)')");
  static const std::regex kStack(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex kUsed(R"(Used (\d+) registers)");
  static const std::regex kSmem(R"((\d+) bytes smem)");
  static const std::regex kCmem(R"((\d+) bytes cmem\[0\])");
  std::istringstream in(log);
  std::string line, current;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, kCompiling) || std::regex_search(line, m, kFunc)) {
      current = m[1];
      out[current];
      continue;
    }
    if (current.empty()) continue;
    ResourceReport& r = out[current];
    if (std::regex_search(line, m, kStack)) {
      r.stackFrame = std::stoll(m[1]);
      r.spillStores = std::stoll(m[2]);
      r.spillLoads = std::stoll(m[3]);
    }
    if (std::regex_search(line, m, kUsed)) r.registers = std::stoi(m[1]);
    if (std::regex_search(line, m, kSmem)) r.smemBytes = std::stoll(m[1]);
    if (std::regex_search(line, m, kCmem)) r.cmemBytes = std::stoll(m[1]);
  }
  return out;
}

namespace {

// Quote the offending source lines ("name(LINE): error") so the error says where.
std::string annotateLog(const std::string& log, const std::string& unitName, const std::string& source) {
  std::vector<std::string> lines;
  std::istringstream src(source);
  for (std::string l; std::getline(src, l);) lines.push_back(l);
  std::string out = log;
  static const std::regex kLoc(R"(([^\s(]+)\((\d+)\): (error|warning))");
  std::smatch m;
  std::string::const_iterator it = log.begin();
  while (std::regex_search(it, log.end(), m, kLoc)) {
    size_t n = std::stoul(m[2]);
    if (m[1] == unitName && n >= 1 && n <= lines.size())
      out += fmt::format("\n  at {}:{}: {}", unitName, n, lines[n - 1]);
    it = m.suffix().first;
  }
  return out;
}

}  // namespace

static const std::string& templatesDigest() {
  static const std::string digest = [] {
    std::string all;
    for (const auto& f : embeddedTemplates()) {
      all += f.path;
      all += '\0';
      all += f.contents;
      all += '\0';
    }
    return sha256Hex(all);
  }();
  return digest;
}

std::string unitContentKey(const CudaUnit& unit, int arch, bool cubin, bool fmad) {
  std::string k = fmt::format("nvrtc={}\narch={}\ncubin={}\nheaders={}\n", nvrtcVersionString(), arch, cubin,
                              templatesDigest());
  for (const auto& o : nvrtcOptions(arch, cubin, fmad)) k += o + "\n";
  k += unit.source;
  return sha256Hex(k);
}

std::string unitContentKey(const UnitOrigin& o) { return unitContentKey(o.unit, o.arch, o.cubin, o.fmad); }

Result<CompiledUnit> compileUnit(const CudaUnit& unit, const std::string& unitName, int arch, bool cubin,
                                 bool fmad) {
  const auto& files = embeddedTemplates();
  std::vector<std::string> names, bodies;
  for (const auto& f : files) {
    names.emplace_back(f.path);
    bodies.emplace_back(f.contents);
  }
  std::vector<const char*> nameP, bodyP;
  for (size_t i = 0; i < files.size(); ++i) {
    nameP.push_back(names[i].c_str());
    bodyP.push_back(bodies[i].c_str());
  }
  nvrtcProgram prog;
  nvrtcResult rc = nvrtcCreateProgram(&prog, unit.source.c_str(), unitName.c_str(), int(files.size()),
                                      bodyP.data(), nameP.data());
  if (rc != NVRTC_SUCCESS)
    return Error{fmt::format("NVRTC: creating program '{}' failed: {}", unitName, nvrtcGetErrorString(rc))};
  struct Guard { nvrtcProgram* p; ~Guard() { nvrtcDestroyProgram(p); } } guard{&prog};

  CompiledUnit out;
  out.origin = UnitOrigin{unit, unitName, arch, cubin, fmad};
  out.options = nvrtcOptions(arch, cubin, fmad);
  std::vector<const char*> opts;
  for (const auto& o : out.options) opts.push_back(o.c_str());
  rc = nvrtcCompileProgram(prog, int(opts.size()), opts.data());
  size_t logSize = 0;
  nvrtcGetProgramLogSize(prog, &logSize);
  out.log.resize(logSize);
  if (logSize) nvrtcGetProgramLog(prog, out.log.data());
  while (!out.log.empty() && out.log.back() == '\0') out.log.pop_back();
  if (rc != NVRTC_SUCCESS)
    return Error{fmt::format("NVRTC: compiling '{}' for {}_{} failed: {}\n{}", unitName,
                             cubin ? "sm" : "compute", arch, nvrtcGetErrorString(rc),
                             annotateLog(out.log, unitName, unit.source))};
  size_t ptxSize = 0;
  nvrtcGetPTXSize(prog, &ptxSize);
  out.ptx.resize(ptxSize);
  nvrtcGetPTX(prog, out.ptx.data());
  while (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  if (cubin) {
    size_t n = 0;
    if (nvrtcGetCUBINSize(prog, &n) != NVRTC_SUCCESS || n == 0)
      return Error{fmt::format("NVRTC: no cubin produced for '{}' (sm_{})", unitName, arch)};
    out.cubin.resize(n);
    nvrtcGetCUBIN(prog, reinterpret_cast<char*>(out.cubin.data()));
    out.resources = parsePtxasReport(out.log);
  }
  return out;
}

}  // namespace deepinfer
