// KV-cache pages: a fixed number of equal pages handed out by id. PagePool is the bookkeeping
// alone (host only, no CUDA; not thread-safe: one owner, e.g. the scheduler); DevicePagePool
// adds the device memory, one buffer of numPages * pageBytes, so page p lives at
// base + p * pageBytes.
#pragma once
#include <cstdint>
#include <vector>

#include "deepinfer/Device.h"
#include "deepinfer/Error.h"

namespace deepinfer {

class PagePool {
 public:
  using PageId = int32_t;

  // A pool of numPages free pages (ids 0 .. numPages - 1; a negative count gives an empty pool).
  explicit PagePool(PageId numPages = 0);

  // n free pages (lowest ids first on a fresh pool, then most recently released first), marked
  // used. When fewer than n are free: the error "out of KV pages: need n, m free of total" and
  // nothing is allocated. n == 0 returns no pages; n < 0 is an error.
  Result<std::vector<PageId>> allocate(int64_t n);

  // Returns the pages to the pool. All or nothing: an id outside the pool, a page that is not
  // allocated (a double free) or an id listed twice is an error naming it, and nothing is
  // released.
  Status release(const std::vector<PageId>& pages);
  Status release(PageId page) { return release(std::vector<PageId>{page}); }

  int64_t totalCount() const { return int64_t(used_.size()); }
  int64_t freeCount() const { return int64_t(free_.size()); }
  int64_t usedCount() const { return totalCount() - freeCount(); }
  // The most pages that were in use at once since construction or resetHighWater().
  int64_t highWater() const { return highWater_; }
  void resetHighWater() { highWater_ = usedCount(); }
  bool isAllocated(PageId p) const { return p >= 0 && p < totalCount() && used_[size_t(p)]; }

 private:
  std::vector<PageId> free_;  // a stack: back() is handed out next
  std::vector<bool> used_;
  int64_t highWater_ = 0;
};

class DevicePagePool {
 public:
  // Allocates numPages * pageBytes bytes of device memory (the current context: call
  // Device::use() first). pageBytes > 0; numPages >= 0 and below 2^31.
  static Result<DevicePagePool> create(int64_t numPages, int64_t pageBytes);
  DevicePagePool() = default;

  PagePool& pages() { return pool_; }
  const PagePool& pages() const { return pool_; }
  Result<std::vector<PagePool::PageId>> allocate(int64_t n) { return pool_.allocate(n); }
  Status release(const std::vector<PagePool::PageId>& p) { return pool_.release(p); }

  int64_t numPages() const { return pool_.totalCount(); }
  int64_t pageBytes() const { return pageBytes_; }
  uint64_t baseAddr() const { return buffer_.addr(); }
  // Device address of page p (p in [0, numPages); not checked for being allocated).
  uint64_t pageAddr(PagePool::PageId p) const { return buffer_.addr() + uint64_t(p) * uint64_t(pageBytes_); }
  const DeviceBuffer& buffer() const { return buffer_; }

 private:
  DeviceBuffer buffer_;
  PagePool pool_;
  int64_t pageBytes_ = 0;
};

}  // namespace deepinfer
