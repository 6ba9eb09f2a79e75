// The collectives of the tensor ranks of one pipeline stage (docs/parallelism.md §1, §2), as the
// forward pass calls them: every rank's pass runs on a host thread of its own and calls
// allReduceSum / allGather with its own buffers; the call returns once the collective of all
// ranks has been enqueued on every rank's stream. The last rank to arrive enqueues it for all of
// them, from its one thread, so the backend sees one call per collective with the ranks in rank
// order (NCCL: one ncclGroupStart/End over every rank's communicator; the one-GPU test double:
// a device sum in rank order). A rank that fails (fail()) or does not arrive within the timeout
// turns every pending and later call of every rank into an error naming it: never a hang.
// No device code here: the backends are in runtime/model/gpu/GpuCollective.h.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "deepinfer/Error.h"
#include "deepinfer/Tensor.h"

namespace deepinfer {

enum class TpOp { AllReduceSum, AllGather };
const char* tpOpName(TpOp op);

// One rank's part of a collective: `count` elements of `dtype` from send, into recv (all-reduce:
// count elements, may equal send; all-gather: size() * count elements, rank r's at r * count),
// ordered on `stream` (a CUstream of the rank's device).
struct TpCall {
  uint64_t send = 0, recv = 0;
  void* stream = nullptr;
};

class TpCollective {
 public:
  TpCollective(int ranks, double timeoutSeconds);
  virtual ~TpCollective() = default;
  TpCollective(const TpCollective&) = delete;
  TpCollective& operator=(const TpCollective&) = delete;

  int size() const { return ranks_; }
  double timeoutSeconds() const { return timeout_; }
  virtual std::string backend() const = 0;  // for reports: "nccl (NCCL 2.x ...)", "logical (one GPU)"

  // Sum over ranks (F32 or BF16 elements). Every rank calls it with the same count and dtype.
  Status allReduceSum(int rank, uint64_t send, uint64_t recv, size_t count, DType dtype, void* stream);
  // recv = send of rank 0 | send of rank 1 | ... on every rank.
  Status allGather(int rank, uint64_t send, uint64_t recv, size_t count, DType dtype, void* stream);
  // A rank stops (its pass failed): every rank's pending and later calls return `why`.
  void fail(int rank, const std::string& why);
  Status failure() const;  // the first failure, or OK
  // Failure injection (tests): `rank` fails with `why` when it arrives at the collective after
  // `afterCollectives` completed ones (its pass stops there, the others are waiting or arrive
  // later), exactly as a pass that fails before that collective and calls fail().
  void injectFailure(int rank, int64_t afterCollectives, const std::string& why);
  // After a forward call: waits for the ranks' streams and reports an asynchronous error of the
  // transport (NCCL's), within the timeout.
  virtual Status finish(const std::vector<void*>& streams) = 0;
  int64_t collectives() const;  // completed so far (for tests and reports)

 protected:
  // One collective of every rank: calls[r] is rank r's part. Runs on the thread of the last
  // arriving rank (`caller`: its device must be current again on return), under the rendezvous
  // lock (so the backend needs no lock of its own).
  virtual Status enqueue(TpOp op, const std::vector<TpCall>& calls, size_t count, DType dtype, int caller) = 0;

 private:
  Status arrive(int rank, TpOp op, const TpCall& call, size_t count, DType dtype);

  const int ranks_;
  const double timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<TpCall> calls_;
  std::vector<char> arrived_;
  int arrivedCount_ = 0;
  TpOp op_ = TpOp::AllReduceSum;
  size_t count_ = 0;
  DType dtype_ = DType::F32;
  int64_t generation_ = 0;  // completed collectives
  Status result_;           // of the last completed collective
  std::string failed_;      // the first failure (empty: none)
  int injectRank_ = -1;     // injectFailure's
  int64_t injectAfter_ = 0;
  std::string injectWhy_;
};

}  // namespace deepinfer
