// A small persistent thread pool for the CPU reference forward pass. Work is split by index
// ranges and every index's result depends only on that index, so outputs are bit-identical
// whatever the number of threads.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace deepinfer {

class CpuThreadPool {
 public:
  // `threads` workers in total, the calling thread included; <= 0 picks the hardware count.
  explicit CpuThreadPool(int threads);
  ~CpuThreadPool();
  CpuThreadPool(const CpuThreadPool&) = delete;
  CpuThreadPool& operator=(const CpuThreadPool&) = delete;

  int threads() const { return int(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint ranges covering [0, n) and waits for all of them. A call
  // from inside a running fn runs inline (no nested parallelism).
  void parallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void workerLoop();
  void runChunks();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t jobSize_ = 0, chunk_ = 1, nextBegin_ = 0;
  int busy_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace deepinfer
