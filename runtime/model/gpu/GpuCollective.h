// The two backends of TpCollective (docs/parallelism.md §1):
//  - NCCL, the transport: one rank per GPU, all ranks driven by this one process through one
//    NcclGroup (ncclGroupStart/End over every communicator from the last arriving rank's thread);
//    finish() waits for the streams and turns an asynchronous NCCL error or a stuck rank into an
//    error within the timeout. One rank on one GPU runs through it too.
//  - Logical ranks sharing one GPU: a test double, not a transport. NCCL refuses two ranks on one
//    GPU, so TP2 on a one-GPU machine sums the ranks' partial outputs with a device add in rank
//    order ((p0 + p1) + p2 ...), which checks the sharding arithmetic of the forward pass.
// Internal to the runtime.
#pragma once
#include <memory>
#include <vector>

#include "ModelKernels.h"
#include "deepinfer/Device.h"
#include "lib/Nccl.h"
#include "model/parallel/TpCollective.h"

namespace deepinfer {

class NcclTpCollective : public TpCollective {
 public:
  // One rank per device (distinct GPUs), rank r on devices[r].
  static Result<std::unique_ptr<NcclTpCollective>> create(const std::vector<std::shared_ptr<Device>>& devices,
                                                          double timeoutSeconds);
  std::string backend() const override;
  Status finish(const std::vector<void*>& streams) override;

 protected:
  Status enqueue(TpOp op, const std::vector<TpCall>& calls, size_t count, DType dtype, int caller) override;

 private:
  NcclTpCollective(std::unique_ptr<NcclGroup> group, std::vector<std::shared_ptr<Device>> devices,
                   double timeoutSeconds);
  std::unique_ptr<NcclGroup> group_;
  std::vector<std::shared_ptr<Device>> devices_;
};

class LogicalTpCollective : public TpCollective {
 public:
  // `ranks` logical ranks on `dev`; the sums run with `kernels` (loaded for `dev`), on rank 0's
  // stream, after every rank's stream has reached the collective.
  static Result<std::unique_ptr<LogicalTpCollective>> create(int ranks, std::shared_ptr<Device> dev,
                                                             const ModelKernels& kernels, double timeoutSeconds);
  std::string backend() const override;
  Status finish(const std::vector<void*>& streams) override;

 protected:
  Status enqueue(TpOp op, const std::vector<TpCall>& calls, size_t count, DType dtype, int caller) override;

 private:
  LogicalTpCollective(int ranks, std::shared_ptr<Device> dev, const ModelKernels& kernels, double timeoutSeconds);
  std::shared_ptr<Device> dev_;
  const ModelKernels& kernels_;
  std::vector<Event> arrivedEv_;  // per rank: its stream reached the collective
  Event doneEv_;                  // rank 0's stream finished the sum
  DeviceBuffer acc_;              // the running sum (grow-only)
};

}  // namespace deepinfer
