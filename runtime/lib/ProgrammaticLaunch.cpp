#include "deepinfer/ProgrammaticLaunch.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

namespace deepinfer {

namespace {
constexpr int kMinArch = 90;  // griddepcontrol and the launch attribute: compute capability 9.0
}

bool programmaticLaunchDefault() {
  const char* v = std::getenv("DEEPINFER_PDL");
  if (!v) return true;
  return !(std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0 || std::strcmp(v, "false") == 0);
}

bool useProgrammaticLaunch(const ProgrammaticLaunchQuery& q) {
  return q.enabled && q.entryWaits && q.compiledArch >= kMinArch && q.deviceArch >= kMinArch && !q.legacyStream;
}

std::string describeProgrammaticLaunch(bool enabled, int compiledArch, int deviceArch) {
  if (!enabled) return "off (switched off: DEEPINFER_PDL=0 or --pdl off)";
  if (deviceArch < kMinArch) return fmt::format("off (the GPU is sm_{}; it needs sm_{}+)", deviceArch, kMinArch);
  if (compiledArch < kMinArch)
    return fmt::format("off (kernels compiled for sm_{}, which has no griddepcontrol)", compiledArch);
  return "on";
}

}  // namespace deepinfer
