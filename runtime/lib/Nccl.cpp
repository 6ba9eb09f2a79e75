#include "lib/Nccl.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <glob.h>

#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>

#include "lib/CudaDriver.h"

namespace deepinfer {

// The few declarations of nccl.h used here (values from NCCL's public header; stable ABI).
using ncclResult = int;
using ncclComm = void*;
constexpr ncclResult kNcclSuccess = 0, kNcclInProgress = 7;
constexpr int kNcclSum = 0, kNcclFloat32 = 7, kNcclBfloat16 = 9;

struct NcclLibrary {
  std::string path;
  int version = 0;
  ncclResult (*getVersion)(int*);
  const char* (*getErrorString)(ncclResult);
  ncclResult (*commInitAll)(ncclComm*, int, const int*);
  ncclResult (*commDestroy)(ncclComm);
  ncclResult (*commAbort)(ncclComm);
  ncclResult (*commGetAsyncError)(ncclComm, ncclResult*);
  ncclResult (*groupStart)();
  ncclResult (*groupEnd)();
  ncclResult (*allReduce)(const void*, void*, size_t, int, int, ncclComm, void*);
  ncclResult (*allGather)(const void*, void*, size_t, int, ncclComm, void*);
};

std::string describeNccl(const NcclLibrary& lib) {
  // NCCL >= 2.9 codes versions as major * 10000 + minor * 100 + patch.
  return fmt::format("NCCL {}.{}.{} ({})", lib.version / 10000, lib.version / 100 % 100, lib.version % 100, lib.path);
}

std::vector<std::string> defaultNcclCandidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("DEEPINFER_NCCL_LIBRARY"); env && *env) out.push_back(env);
  out.push_back("libnccl.so.2");
  std::vector<std::string> patterns = {"/usr/local/lib/python3*/*-packages/nvidia/nccl/lib/libnccl.so.2",
                                       "/usr/lib/python3*/*-packages/nvidia/nccl/lib/libnccl.so.2",
                                       "/opt/conda/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2"};
  if (const char* venv = std::getenv("VIRTUAL_ENV"); venv && *venv)
    patterns.push_back(std::string(venv) + "/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2");
  if (const char* home = std::getenv("HOME"); home && *home)
    patterns.push_back(std::string(home) + "/.local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2");
  for (const std::string& p : patterns) {
    glob_t g{};
    if (glob(p.c_str(), 0, nullptr, &g) == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
    globfree(&g);
  }
  return out;
}

Result<const NcclLibrary*> loadNcclLibrary(const std::vector<std::string>& candidates) {
  std::string tried;
  for (const std::string& path : candidates) {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      tried += fmt::format("\n  {}: {}", path, dlerror());
      continue;
    }
    auto lib = std::make_unique<NcclLibrary>();
    lib->path = path;
    bool complete = true;
    auto resolve = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn) {
        tried += fmt::format("\n  {}: no {}", path, name);
        complete = false;
      }
    };
    resolve(lib->getVersion, "ncclGetVersion");
    resolve(lib->getErrorString, "ncclGetErrorString");
    resolve(lib->commInitAll, "ncclCommInitAll");
    resolve(lib->commDestroy, "ncclCommDestroy");
    resolve(lib->commAbort, "ncclCommAbort");
    resolve(lib->commGetAsyncError, "ncclCommGetAsyncError");
    resolve(lib->groupStart, "ncclGroupStart");
    resolve(lib->groupEnd, "ncclGroupEnd");
    resolve(lib->allReduce, "ncclAllReduce");
    resolve(lib->allGather, "ncclAllGather");
    if (!complete || lib->getVersion(&lib->version) != kNcclSuccess) {
      dlclose(h);
      continue;
    }
    return lib.release();  // lives as long as the process (the library stays loaded)
  }
  return Error{fmt::format("NCCL could not be loaded (set DEEPINFER_NCCL_LIBRARY to libnccl.so.2, or install the "
                           "nvidia-nccl-cu13 wheel); tried:{}",
                           tried.empty() ? std::string(" nothing") : tried)};
}

Result<const NcclLibrary*> ncclLibrary() {
  static const Result<const NcclLibrary*> lib = loadNcclLibrary(defaultNcclCandidates());
  return lib;
}

namespace {

Result<int> ncclType(DType t) {
  if (t == DType::F32) return kNcclFloat32;
  if (t == DType::BF16) return kNcclBfloat16;
  return Error{fmt::format("NCCL collectives here take F32 or BF16, not {}", dtypeName(t))};
}

}  // namespace

Result<std::unique_ptr<NcclGroup>> NcclGroup::create(const std::vector<std::shared_ptr<Device>>& devices) {
  if (devices.empty()) return Error{"an NCCL group needs at least one device"};
  std::set<int> seen;
  std::vector<int> ordinals;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (!devices[i]) return Error{fmt::format("NCCL group: device {} is null", i)};
    if (!seen.insert(devices[i]->ordinal()).second)
      return Error{fmt::format("NCCL group: GPU {} appears twice (one rank per GPU)", devices[i]->ordinal())};
    ordinals.push_back(devices[i]->ordinal());
  }
  auto lib = ncclLibrary();
  if (!lib.ok()) return lib.error();
  std::unique_ptr<NcclGroup> g(new NcclGroup());
  g->lib_ = *lib;
  g->devices_ = devices;
  g->comms_.assign(devices.size(), nullptr);
  const ncclResult rc = g->lib_->commInitAll(g->comms_.data(), int(devices.size()), ordinals.data());
  if (rc != kNcclSuccess) {
    g->comms_.clear();
    return Error{fmt::format("ncclCommInitAll over {} GPUs failed: {}", devices.size(), g->lib_->getErrorString(rc))};
  }
  return g;
}

NcclGroup::~NcclGroup() {
  if (abortThread_.joinable()) abortThread_.join();
  for (void* c : comms_)
    if (c) lib_->commDestroy(c);
}

void NcclGroup::abortAll() {
  std::vector<void*> comms;
  for (void*& c : comms_) {
    if (c) comms.push_back(c);
    c = nullptr;
  }
  aborted_ = true;
  const NcclLibrary* lib = lib_;
  abortThread_ = std::thread([lib, comms] {
    for (void* c : comms) lib->commAbort(c);
  });
}

Status NcclGroup::checkCall(const std::vector<uint64_t>& send, const std::vector<uint64_t>& recv,
                            const std::vector<void*>& streams, DType dtype, const char* what) const {
  if (aborted_) return Error{fmt::format("{}: the NCCL group was aborted ({})", what, abortReason_)};
  const size_t n = devices_.size();
  if (send.size() != n || recv.size() != n || streams.size() != n)
    return Error{fmt::format("{}: {} send, {} recv buffers and {} streams for {} ranks", what, send.size(), recv.size(),
                             streams.size(), n)};
  for (size_t r = 0; r < n; ++r)
    if (send[r] == 0 || recv[r] == 0) return Error{fmt::format("{}: rank {} has a null buffer", what, r)};
  auto t = ncclType(dtype);
  if (!t.ok()) return Error{fmt::format("{}: {}", what, t.error().message)};
  return {};
}

// One collective per rank inside one NCCL group (one thread drives every GPU: the group lets
// NCCL launch them together instead of deadlocking on the first rank's collective).
template <class PerRank>
Status NcclGroup::inGroup(const std::string& what, PerRank&& perRank) {
  lib_->groupStart();
  ncclResult first = kNcclSuccess;
  for (size_t r = 0; r < comms_.size(); ++r) {
    const ncclResult rc = perRank(r);
    if (first == kNcclSuccess && rc != kNcclSuccess) first = rc;
  }
  const ncclResult end = lib_->groupEnd();
  if (first != kNcclSuccess || (end != kNcclSuccess && end != kNcclInProgress))
    return Error{fmt::format("{}: {}", what, lib_->getErrorString(first != kNcclSuccess ? first : end))};
  return {};
}

Status NcclGroup::allReduceSum(const std::vector<uint64_t>& send, const std::vector<uint64_t>& recv, size_t count,
                               DType dtype, const std::vector<void*>& streams) {
  DI_TRY(checkCall(send, recv, streams, dtype, "all-reduce"));
  const int t = *ncclType(dtype);
  return inGroup(fmt::format("all-reduce of {} elements", count), [&](size_t r) {
    return lib_->allReduce(reinterpret_cast<const void*>(send[r]), reinterpret_cast<void*>(recv[r]), count, t, kNcclSum,
                           comms_[r], streams[r]);
  });
}

Status NcclGroup::allGather(const std::vector<uint64_t>& send, const std::vector<uint64_t>& recv, size_t count,
                            DType dtype, const std::vector<void*>& streams) {
  DI_TRY(checkCall(send, recv, streams, dtype, "all-gather"));
  const int t = *ncclType(dtype);
  return inGroup(fmt::format("all-gather of {} elements per rank", count), [&](size_t r) {
    return lib_->allGather(reinterpret_cast<const void*>(send[r]), reinterpret_cast<void*>(recv[r]), count, t,
                           comms_[r], streams[r]);
  });
}

Status NcclGroup::synchronize(const std::vector<void*>& streams, double timeoutSeconds) {
  if (aborted_) return Error{fmt::format("the NCCL group was aborted ({})", abortReason_)};
  if (streams.size() != devices_.size())
    return Error{fmt::format("synchronize: {} streams for {} ranks", streams.size(), devices_.size())};
  auto drv = cuda::driver();
  if (!drv.ok()) return drv.error();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSeconds);
  std::vector<bool> done(streams.size(), false);
  while (true) {
    size_t idle = 0;
    for (size_t r = 0; r < streams.size(); ++r) {
      ncclResult async = kNcclSuccess;
      lib_->commGetAsyncError(comms_[r], &async);
      if (async != kNcclSuccess && async != kNcclInProgress) {
        abortReason_ = fmt::format("rank {} (GPU {}) reported {}", r, devices_[r]->ordinal(), lib_->getErrorString(async));
        abortAll();
        return Error{fmt::format("NCCL: {}; the group's communicators were aborted", abortReason_)};
      }
      if (!done[r]) {
        DI_TRY(devices_[r]->use());
        const CUresult q = (*drv)->cuStreamQuery(static_cast<CUstream>(streams[r]));
        if (q == CUDA_SUCCESS) done[r] = true;
        else if (q != CUDA_ERROR_NOT_READY) return cuda::cudaError(q, fmt::format("rank {}: cuStreamQuery", r));
      }
      idle += done[r];
    }
    if (idle == streams.size()) return {};
    if (std::chrono::steady_clock::now() > deadline) {
      std::string busy;
      for (size_t r = 0; r < streams.size(); ++r)
        if (!done[r]) busy += fmt::format("{}{} (GPU {})", busy.empty() ? "" : ", ", r, devices_[r]->ordinal());
      abortReason_ = fmt::format("rank {} still busy after {:.1f} s", busy, timeoutSeconds);
      abortAll();
      return Error{fmt::format("NCCL: {}; the group's communicators were aborted", abortReason_)};
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace deepinfer
