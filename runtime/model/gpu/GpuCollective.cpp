// The NCCL and logical-rank backends of the tensor ranks' collectives (GpuCollective.h).
#include "GpuCollective.h"

#include <fmt/format.h>

#include "deepinfer/DeviceCopy.h"

namespace deepinfer {

Result<std::unique_ptr<NcclTpCollective>> NcclTpCollective::create(const std::vector<std::shared_ptr<Device>>& devices,
                                                                   double timeoutSeconds) {
  if (!(timeoutSeconds > 0)) return Error{fmt::format("collective timeout {} s must be positive", timeoutSeconds)};
  auto group = NcclGroup::create(devices);
  if (!group.ok()) return group.error();
  return std::unique_ptr<NcclTpCollective>(new NcclTpCollective(std::move(*group), devices, timeoutSeconds));
}

NcclTpCollective::NcclTpCollective(std::unique_ptr<NcclGroup> group, std::vector<std::shared_ptr<Device>> devices,
                                   double timeoutSeconds)
    : TpCollective(group->size(), timeoutSeconds), group_(std::move(group)), devices_(std::move(devices)) {}

std::string NcclTpCollective::backend() const { return "nccl (" + describeNccl(group_->library()) + ")"; }

Status NcclTpCollective::enqueue(TpOp op, const std::vector<TpCall>& calls, size_t count, DType dtype, int caller) {
  std::vector<uint64_t> send, recv;
  std::vector<void*> streams;
  for (const TpCall& c : calls) {
    send.push_back(c.send);
    recv.push_back(c.recv);
    streams.push_back(c.stream);
  }
  Status st = op == TpOp::AllReduceSum ? group_->allReduceSum(send, recv, count, dtype, streams)
                                       : group_->allGather(send, recv, count, dtype, streams);
  // NCCL launches on every rank's device; the calling rank's thread goes on with its own.
  Status back = devices_[size_t(caller)]->use();
  return st.ok() ? back : st;
}

Status NcclTpCollective::finish(const std::vector<void*>& streams) {
  if (Status f = failure(); !f.ok()) return f;
  Status st = group_->synchronize(streams, timeoutSeconds());
  if (!st.ok()) fail(-1, st.error().message);
  return st;
}

Result<std::unique_ptr<LogicalTpCollective>> LogicalTpCollective::create(int ranks, std::shared_ptr<Device> dev,
                                                                         const ModelKernels& kernels,
                                                                         double timeoutSeconds) {
  if (ranks < 1) return Error{fmt::format("logical collective: {} ranks", ranks)};
  if (!dev) return Error{"logical collective: no device"};
  if (!(timeoutSeconds > 0)) return Error{fmt::format("collective timeout {} s must be positive", timeoutSeconds)};
  std::unique_ptr<LogicalTpCollective> c(new LogicalTpCollective(ranks, std::move(dev), kernels, timeoutSeconds));
  DI_TRY(c->dev_->use());
  for (int r = 0; r < ranks; ++r) {
    auto ev = Event::create();
    if (!ev.ok()) return ev.error();
    c->arrivedEv_.push_back(std::move(*ev));
  }
  auto done = Event::create();
  if (!done.ok()) return done.error();
  c->doneEv_ = std::move(*done);
  return c;
}

LogicalTpCollective::LogicalTpCollective(int ranks, std::shared_ptr<Device> dev, const ModelKernels& kernels,
                                         double timeoutSeconds)
    : TpCollective(ranks, timeoutSeconds), dev_(std::move(dev)), kernels_(kernels) {}

std::string LogicalTpCollective::backend() const {
  return fmt::format("logical ({} ranks sharing GPU {}: a test double, sums in rank order)", size(), dev_->ordinal());
}

Status LogicalTpCollective::enqueue(TpOp op, const std::vector<TpCall>& calls, size_t count, DType dtype, int) {
  const int n = size();
  const size_t bytes = count * dtypeSize(dtype);
  DI_TRY(dev_->use());  // the calling rank's thread may not have made it current
  void* s0 = calls[0].stream;
  // Rank 0's stream runs the collective once every rank's stream has reached it.
  for (int r = 1; r < n; ++r) {
    DI_TRY(arrivedEv_[size_t(r)].record(calls[size_t(r)].stream));
    DI_TRY(arrivedEv_[size_t(r)].waitIn(s0));
  }
  if (bytes > 0) {
    if (op == TpOp::AllReduceSum) {
      if (acc_.size() < bytes) {
        DI_TRY(dev_->synchronize());  // the previous accumulator may still be read
        acc_ = DeviceBuffer{};
        auto a = DeviceBuffer::alloc(bytes);
        if (!a.ok()) return a.error();
        acc_ = std::move(*a);
      }
      // ((send0 + send1) + send2) ...: one fixed order, whatever order the ranks arrived in.
      DI_TRY(copyDeviceToDevice(acc_.addr(), calls[0].send, bytes, s0));
      for (int r = 1; r < n; ++r)
        DI_TRY(kernels_.addElems(acc_.addr(), calls[size_t(r)].send, acc_.addr(), int64_t(count), dtype == DType::BF16,
                                 s0));
      for (int r = 0; r < n; ++r) DI_TRY(copyDeviceToDevice(calls[size_t(r)].recv, acc_.addr(), bytes, s0));
    } else {
      // Sends first read into the accumulator (a rank's recv may overlap another's send).
      if (acc_.size() < bytes * size_t(n)) {
        DI_TRY(dev_->synchronize());
        acc_ = DeviceBuffer{};
        auto a = DeviceBuffer::alloc(bytes * size_t(n));
        if (!a.ok()) return a.error();
        acc_ = std::move(*a);
      }
      for (int r = 0; r < n; ++r) DI_TRY(copyDeviceToDevice(acc_.addr() + bytes * size_t(r), calls[size_t(r)].send, bytes, s0));
      for (int r = 0; r < n; ++r) DI_TRY(copyDeviceToDevice(calls[size_t(r)].recv, acc_.addr(), bytes * size_t(n), s0));
    }
  }
  // Every rank's later work waits for the result.
  DI_TRY(doneEv_.record(s0));
  for (int r = 1; r < n; ++r) DI_TRY(doneEv_.waitIn(calls[size_t(r)].stream));
  return {};
}

Status LogicalTpCollective::finish(const std::vector<void*>& streams) {
  if (Status f = failure(); !f.ok()) return f;
  DI_TRY(dev_->use());
  for (void* s : streams) {
    auto ev = Event::create();
    if (!ev.ok()) return ev.error();
    DI_TRY(ev->record(s));
    DI_TRY(ev->synchronize());
  }
  return {};
}

}  // namespace deepinfer
