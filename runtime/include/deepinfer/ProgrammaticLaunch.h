// Programmatic dependent launch (sm_90+): whether a kernel launch carries
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, which lets the kernel be launched, and its
// CTAs become resident, while the previous kernel of its stream drains (the CUDA launch gap of a
// graph's kernel node, ~3.6 us on the H200, overlaps that kernel's tail). The device half is
// templates/common/GridDependency.cuh: every generated entry and every model kernel waits for
// the prior grids (griddepcontrol.wait) before anything else.
//
// The attribute only relaxes a kernel -> kernel edge of one stream, and only once the earlier
// kernel triggers (griddepcontrol.launch_dependents, or its completion). After a copy, a memset,
// an event wait or a kernel of another library that never triggers, the launch is ordered as
// usual. Stream capture records the relaxed edge as a programmatic graph edge.
#pragma once
#include <string>

namespace deepinfer {

// The process default of the switch: on unless DEEPINFER_PDL is "0", "off" or "false".
bool programmaticLaunchDefault();

// What the choice for one launch depends on.
struct ProgrammaticLaunchQuery {
  bool enabled = false;       // the switch (JitOptions::programmaticLaunch)
  bool entryWaits = false;    // the entry starts with di::grid_dependency_sync()
  int compiledArch = 0;       // the arch its code was compiled for (80 for sm_80 PTX)
  int deviceArch = 0;         // the GPU's compute capability, major * 10 + minor
  bool legacyStream = false;  // launched on the legacy default stream (nullptr)
};

// True only when every condition holds: the switch is on; the entry waits; its code was compiled
// for sm_90+ (below that griddepcontrol does not exist and the wait is compiled out, so such a
// kernel, e.g. sm_80 PTX run on an H200, would race with its predecessor); the GPU is 9.0+; and
// the stream is a real one (the legacy stream's implicit synchronization with other streams is
// not a same-stream kernel edge, so it keeps plain launches; graphs never capture it).
bool useProgrammaticLaunch(const ProgrammaticLaunchQuery& q);

// For reports: "on", or "off (why)", for code compiled for `compiledArch` on a `deviceArch` GPU.
std::string describeProgrammaticLaunch(bool enabled, int compiledArch, int deviceArch);

}  // namespace deepinfer
