// Launching a loaded kernel on strided tensor views bound by canonical name (docs/ops.md §11).
// Every view is checked against the op the kernel was built for: a known tensor of the op,
// the signature's dtype, the description's shape, inside its buffer when the buffer is known,
// and dense unless the kernel addresses that tensor with the caller's strides (gather_kcache's
// `out`, docs/ops.md §3). Errors name the tensor, its shape and strides, and what was expected.
#pragma once
#include <vector>

#include "deepinfer/Jit.h"
#include "deepinfer/TensorView.h"

namespace deepinfer {

// What a set of views binds to: addresses for packParams, and the strides of the views that
// are not dense (each accepted by the kernel family).
struct ViewBindings {
  DeviceAddrMap addrs;
  TensorStrides strides;
};

// Checks `views` against the kernel's op (no GPU work; "__workspace" and "__zeroed", when the
// plan needs them, are U8 views of at least the plan's bytes; "__zeroed" must be zero on entry).
Result<ViewBindings> bindViews(const LoadedKernel& k, const TensorViewMap& views);
// The same checks against an op description alone (no compiled kernel: the reference backend
// holds host views to the rules a launch would); `workspaceBytes` > 0 requires "__workspace",
// `zeroedBytes` > 0 "__zeroed".
Result<ViewBindings> bindViews(const OpDesc& d, const TensorViewMap& views, int64_t workspaceBytes = 0,
                               int64_t zeroedBytes = 0);

// bindViews, pack the parameters with the strides, and launch every step of the plan.
Status launchViews(const Jit& jit, const LoadedKernel& k, const TensorViewMap& views, void* stream);

}  // namespace deepinfer
