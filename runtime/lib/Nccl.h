// NCCL, loaded at run time (dlopen; no link dependency: everything else runs without it), and
// the communicators of one process that drives several GPUs (docs/parallelism.md §1): one
// communicator per device, created together, collectives issued as one group from one thread.
// Internal to the runtime.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "deepinfer/Device.h"
#include "deepinfer/Error.h"
#include "deepinfer/Tensor.h"

namespace deepinfer {

struct NcclLibrary;

// Loads NCCL from the first candidate that opens and has every entry point used here. The
// default candidates: $DEEPINFER_NCCL_LIBRARY, libnccl.so.2 on the loader's path, then the
// nvidia-nccl wheel's library in the usual Python package folders. The error lists what was tried.
Result<const NcclLibrary*> loadNcclLibrary(const std::vector<std::string>& candidates);
Result<const NcclLibrary*> ncclLibrary();  // the default candidates, loaded once
std::vector<std::string> defaultNcclCandidates();
std::string describeNccl(const NcclLibrary& lib);  // "NCCL 2.27.7 (path)"

class NcclGroup {
 public:
  // One rank per device, rank i on devices[i] (distinct GPUs).
  static Result<std::unique_ptr<NcclGroup>> create(const std::vector<std::shared_ptr<Device>>& devices);
  ~NcclGroup();  // destroys the communicators (after an error: waits for their abort to finish)
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  int size() const { return int(devices_.size()); }
  const NcclLibrary& library() const { return *lib_; }

  // Sum over ranks of send[r] into recv[r] (may equal send[r]): `count` elements of F32 or BF16
  // on each rank's device, enqueued on streams[r]. One vector entry per rank.
  Status allReduceSum(const std::vector<uint64_t>& send, const std::vector<uint64_t>& recv, size_t count,
                      DType dtype, const std::vector<void*>& streams);
  // recv[r] = send[0] | send[1] | ... (`count` elements each), on every rank.
  Status allGather(const std::vector<uint64_t>& send, const std::vector<uint64_t>& recv, size_t count, DType dtype,
                   const std::vector<void*>& streams);
  // Waits until every stream is idle. An asynchronous NCCL error on any rank, or streams still
  // busy after `timeoutSeconds`, return an error naming the rank at once: a failed or stuck rank
  // is an error, never a hang. The communicators are then aborted on a thread of their own (an
  // abort frees device memory, which waits for a stuck kernel) and the group is unusable.
  Status synchronize(const std::vector<void*>& streams, double timeoutSeconds);
  bool aborted() const { return aborted_; }

 private:
  NcclGroup() = default;
  Status checkCall(const std::vector<uint64_t>& send, const std::vector<uint64_t>& recv,
                   const std::vector<void*>& streams, DType dtype, const char* what) const;
  void abortAll();  // starts the abort thread
  template <class PerRank>
  Status inGroup(const std::string& what, PerRank&& perRank);

  const NcclLibrary* lib_ = nullptr;
  std::vector<std::shared_ptr<Device>> devices_;
  std::vector<void*> comms_;
  bool aborted_ = false;
  std::string abortReason_;
  std::thread abortThread_;
};

}  // namespace deepinfer
