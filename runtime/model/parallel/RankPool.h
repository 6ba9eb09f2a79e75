// Persistent host threads for the tensor ranks of a model (docs/parallelism.md §2.1): each
// forward call hands every rank its part and waits for all of them, without creating a thread
// per rank per call (tens of µs each). Rank 0 runs on the calling thread, rank r > 0 on worker r,
// the same worker every call (its CUDA context stays current). A rank's task that fails or throws
// is that rank's error; the pool never waits on anything but the tasks themselves, whose blocking
// points (the collectives) have timeouts of their own. The destructor stops and joins the workers.
// No device code here.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "deepinfer/Error.h"

namespace deepinfer {

class RankPool {
 public:
  explicit RankPool(int ranks);
  ~RankPool();
  RankPool(const RankPool&) = delete;
  RankPool& operator=(const RankPool&) = delete;

  int size() const { return ranks_; }
  // Runs task(r) for every rank r at once (rank 0 on this thread) and returns once all have
  // returned: statuses[r] is rank r's (an exception becomes an error naming the rank). One call
  // at a time.
  std::vector<Status> run(const std::function<Status(int)>& task);
  int64_t calls() const { return calls_; }  // completed run()s (tests)

 private:
  void worker(int rank);

  const int ranks_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<Status(int)>* task_ = nullptr;
  std::vector<Status> results_;
  int64_t round_ = 0;  // run() number the workers are to serve
  int pending_ = 0;    // workers still running this round's task
  bool stop_ = false;
  int64_t calls_ = 0;
  std::vector<std::thread> workers_;  // ranks 1 .. ranks - 1
};

}  // namespace deepinfer
