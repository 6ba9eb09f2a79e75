#include "CaseRunner.h"

#include <fmt/format.h>

#include <chrono>

#include "deepinfer/LaunchTally.h"
#include "deepinfer/OpSignature.h"

namespace deepinfer::bench {
namespace {

constexpr uint8_t kPoison = 0x7F;  // bf16/f32 ~3.4e38, i32 0x7F7F7F7F: never a valid output

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

Result<std::unique_ptr<CaseRunner>> CaseRunner::create(Jit& jit, const BenchCase& c, const OpDesc& d) {
  std::unique_ptr<CaseRunner> r(new CaseRunner(jit, c, d));
  const KernelFamily* fam = findKernelFamily(d.op);
  if (!fam) return Error{fmt::format("no kernel family for '{}'", d.op)};
  DI_TRY(jit.device().use());
  r->outs_ = fam->outputs(d);
  for (const auto& [name, t] : c.inputs) {
    auto b = DeviceBuffer::alloc(t.bytes.size());
    if (!b.ok()) return b.error();
    DI_TRY(b->upload(t.bytes.data(), t.bytes.size()));
    r->addrs_[name] = b->addr();
    r->bufs_[name] = std::move(*b);
    if (r->outs_.count(name)) r->inOut_.insert(name);
  }
  for (const auto& [name, spec] : r->outs_) {
    if (r->bufs_.count(name)) continue;
    auto b = DeviceBuffer::alloc(size_t(numel(spec.second)) * dtypeSize(spec.first));
    if (!b.ok()) return b.error();
    r->addrs_[name] = b->addr();
    r->bufs_[name] = std::move(*b);
  }
  return r;
}

Status CaseRunner::restoreAndPoison() {
  for (const auto& [name, spec] : outs_) {
    const DeviceBuffer& b = bufs_.at(name);
    if (inOut_.count(name)) {
      const HostTensor& t = c_.inputs.at(name);
      DI_TRY(b.upload(t.bytes.data(), t.bytes.size()));
    } else {
      DI_TRY(b.fill(kPoison));
    }
  }
  return workspace_.fill(kPoison);
}

Status CaseRunner::ensureWorkspace(int64_t bytes, int64_t zeroedBytes) {
  if (zeroedBytes <= 0) {
    addrs_.erase("__zeroed");
  } else {
    if (int64_t(zeroed_.size()) < zeroedBytes) {
      zeroed_ = DeviceBuffer();
      auto b = DeviceBuffer::alloc(size_t(zeroedBytes));
      if (!b.ok()) return b.error();
      DI_TRY(b->fill(0));
      zeroed_ = std::move(*b);
    }
    addrs_["__zeroed"] = zeroed_.addr();
  }
  if (bytes <= 0) {
    addrs_.erase("__workspace");
    return {};
  }
  if (int64_t(workspace_.size()) < bytes) {
    workspace_ = DeviceBuffer();  // free first: workspaces of split kernels can be large
    auto b = DeviceBuffer::alloc(size_t(bytes));
    if (!b.ok()) return b.error();
    workspace_ = std::move(*b);
  }
  addrs_["__workspace"] = workspace_.addr();
  return {};
}

Status CaseRunner::checkZeroed(int64_t bytes, const char* when) const {
  if (bytes <= 0) return {};
  std::vector<uint8_t> z(size_t(bytes), 0xFF);
  DI_TRY(zeroed_.download(z.data(), z.size()));
  for (size_t i = 0; i < z.size(); ++i)
    if (z[i] != 0)
      return Error{fmt::format("byte {} of the zeroed workspace is {:#04x} {}; the kernel must leave it zero", i,
                               z[i], when)};
  return {};
}

Result<TensorMap> CaseRunner::downloadOutputs(const std::vector<int64_t>& rows) const {
  TensorMap out;
  for (const auto& [name, spec] : outs_) {
    const DeviceBuffer& b = bufs_.at(name);
    std::vector<int64_t> shape = spec.second;
    if (rows.empty()) {
      HostTensor t(spec.first, shape);
      DI_TRY(b.download(t.bytes.data(), t.bytes.size()));
      out[name] = std::move(t);
      continue;
    }
    const size_t rb = rowBytes(spec.first, shape);
    shape.at(0) = int64_t(rows.size());
    HostTensor t(spec.first, shape);
    for (size_t i = 0; i < rows.size(); ++i) DI_TRY(b.download(t.bytes.data() + i * rb, rb, size_t(rows[i]) * rb));
    out[name] = std::move(t);
  }
  return out;
}

VariantResult CaseRunner::run(const Variant& v, const Expected* exp, const TimingOptions& topt) {
  VariantResult r;
  r.kind = v.kind;
  r.target = v.target.name;
  r.arch = v.target.arch();
  const int compilesBefore = jit_.compiles();
  const auto start = std::chrono::steady_clock::now();
  auto k = jit_.get(desc_, v.target, v.config);
  r.getSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.compiled = jit_.compiles() > compilesBefore;
  if (!k.ok()) {
    r.config = v.config ? configToString(*v.config) : "";
    r.error = k.error().message;
    return r;
  }
  const LoadedKernel& lk = **k;
  r.config = configToString(lk.config.config);
  r.ptx = lk.fromPtx;
  for (const auto& [entry, rep] : lk.resources) {
    r.registers = std::max(r.registers, rep.registers);
    r.spillBytes = std::max<int64_t>(r.spillBytes, 0) + rep.spillStores + rep.spillLoads;
  }
  auto fail = [&](const Error& e) {
    r.error = e.message;
    return r;
  };
  if (Status s = ensureWorkspace(lk.kernel.workspaceBytes, lk.kernel.zeroedBytes); !s.ok()) return fail(s.error());
  auto launch = [&] { return jit_.launch(lk, addrs_, nullptr); };

  // Check once: restore in/out tensors, poison the rest, run, compare.
  if (Status s = restoreAndPoison(); !s.ok()) return fail(s.error());
  const LaunchTally before = threadLaunchTally();
  if (Status s = launch(); !s.ok()) return fail(s.error());
  r.kernelsPerLaunch = (threadLaunchTally() - before).kernels;
  if (Status s = jit_.device().synchronize(); !s.ok()) return fail(s.error());
  if (Status s = checkZeroed(lk.kernel.zeroedBytes, "after the checked launch"); !s.ok()) return fail(s.error());
  if (exp) {
    auto got = downloadOutputs(exp->rows);
    if (!got.ok()) return fail(got.error());
    r.check = compareWithExpected(c_, *exp, *got);
  }

  auto t = timeOnDevice(launch, topt);
  if (!t.ok()) return fail(t.error());
  if (Status s = checkZeroed(lk.kernel.zeroedBytes, "after the timed launches"); !s.ok()) return fail(s.error());
  r.timing = *t;
  return r;
}

}  // namespace deepinfer::bench
