// Stream-ordered copies and fills on device addresses (the forward pass's metadata uploads,
// tail copies and poisoning), over the driver API. Host memory may be pageable: the call
// returns once the host bytes have been consumed, so the caller may reuse them at once.
#pragma once
#include <cstddef>
#include <cstdint>

#include "deepinfer/Device.h"
#include "deepinfer/Error.h"

namespace deepinfer {

Status copyHostToDevice(uint64_t dst, const void* src, size_t bytes, void* stream);
Status copyDeviceToHost(void* dst, uint64_t src, size_t bytes, void* stream);  // waits for the copy
Status copyDeviceToDevice(uint64_t dst, uint64_t src, size_t bytes, void* stream);
// From `src` on `srcDev` to `dst` on `dstDev`, ordered on `stream` (of the current context): a
// device-to-device copy when both are the same GPU, else a peer copy (cuMemcpyPeerAsync).
Status copyBetweenDevices(uint64_t dst, const Device& dstDev, uint64_t src, const Device& srcDev, size_t bytes,
                          void* stream);
// `rows` rows of `widthBytes` each, from rows `srcPitch` bytes apart to rows `dstPitch` bytes
// apart, on one device, as one pitched copy (cuMemcpy2DAsync; one graph node when captured).
// Pitches must be at least widthBytes.
Status copyDevice2D(uint64_t dst, size_t dstPitch, uint64_t src, size_t srcPitch, size_t widthBytes, size_t rows,
                    void* stream);
Status fillDevice8(uint64_t dst, uint8_t value, size_t bytes, void* stream);

}  // namespace deepinfer
