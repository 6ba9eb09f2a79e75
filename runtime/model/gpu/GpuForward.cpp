// The forward call's top level (docs/model.md §4, §5): embedding to four streams, per layer
// the engram module, the delayed-mHC pre step, attention, the post step fused with the next
// pre step, the MoE; the final collapse and norm come from the last fused step, then the head.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fmt/ranges.h>
#include <fmt/format.h>

#include "GpuForward.h"
#include "deepinfer/DeviceCopy.h"

namespace deepinfer {

int64_t bucketUp(int64_t n, int64_t floor) {
  int64_t b = std::max<int64_t>(floor, 1);
  while (b < n) b *= 2;
  return b;
}

Result<uint64_t> Scratch::get(const std::string& name, size_t bytes) {
  bytes = std::max<size_t>(bytes, 256);
  auto it = bufs_.find(name);
  if (it != bufs_.end() && it->second.size() >= bytes) return it->second.addr();
  if (it != bufs_.end()) bufs_.erase(it);  // the old one is freed (cuMemFree waits for its users)
  auto b = DeviceBuffer::alloc(bytes + bytes / 4);  // headroom: fewer regrowths as T varies
  if (!b.ok()) return Error{fmt::format("scratch buffer '{}' ({} bytes): {}", name, bytes, b.error().message)};
  const uint64_t a = b->addr();
  bufs_[name] = std::move(*b);
  ++generation_;
  return a;
}

Result<void*> Scratch::pinned(const std::string& name, size_t bytes) {
  bytes = std::max<size_t>(bytes, 256);
  auto it = pinned_.find(name);
  if (it != pinned_.end() && it->second.size() >= bytes) return it->second.data();
  if (it != pinned_.end()) pinned_.erase(it);
  auto b = PinnedBuffer::alloc(bytes + bytes / 4);
  if (!b.ok()) return Error{fmt::format("pinned staging '{}' ({} bytes): {}", name, bytes, b.error().message)};
  void* p = b->data();
  pinned_[name] = std::move(*b);
  ++generation_;
  return p;
}

GpuForwardPass::GpuForwardPass(GpuModelImpl& model, std::vector<GpuSeq> sequences)
    : m(model), cfg(model.cfg), w(model.w), mk(*model.mk), blas(*model.blas), ops(*model.ops), s(model.scratch),
      stream(model.stream), seqs(std::move(sequences)) {
  for (GpuSeq& q : seqs) {
    q.offset = T;
    for (int64_t t = 0; t < q.T; ++t) positions.push_back(q.pos0 + t);
    T += q.T;
  }
  R = int64_t(seqs.size());
}

Result<uint64_t> GpuForwardPass::upload(const std::string& name, const void* data, size_t bytes) {
  auto a = buf(name, bytes);
  if (!a.ok()) return a.error();
  if (mode == Mode::Eager) {
    DI_TRY(copyHostToDevice(*a, data, bytes, stream));
    return *a;
  }
  // Graphs: the copy reads a pinned staging buffer with a stable address, refreshed each step.
  // Every upload of the step gets its own (a name reused per layer holds a value per layer):
  // keyed by its position in the step's sequence of uploads, which the signature fixes.
  auto p = s.pinned(fmt::format("{}#{}", name, uploads++), bytes);
  if (!p.ok()) return p.error();
  std::memcpy(*p, data, bytes);
  if (mode == Mode::Record) DI_TRY(copyHostToDevice(*a, *p, bytes, stream));
  return *a;
}

Status GpuForwardPass::runOp(const std::string& op, const OpAttrs& attrs,
                             const std::map<std::string, DiTensor>& tensors, void* st) {
  sig += op;
  for (const auto& [n, v] : attrs.all()) sig += fmt::format(",{}={}", n, v.isInt ? double(v.i) : v.f);
  for (const auto& [n, t] : tensors) sig += fmt::format(",{}[{}]", n, fmt::join(t.shape, "x"));
  sig += ';';
  if (!launching()) return {};
  return ops.run(op, attrs, tensors, st);
}

Status GpuForwardPass::runOps(const std::vector<DiOpCall>& calls, void* st) {
  for (const DiOpCall& c : calls) {
    sig += c.op;
    for (const auto& [n, v] : c.attrs.all()) sig += fmt::format(",{}={}", n, v.isInt ? double(v.i) : v.f);
    for (const auto& [n, t] : c.tensors) sig += fmt::format(",{}[{}]", n, fmt::join(t.shape, "x"));
    sig += ';';
  }
  if (!launching()) return {};
  return ops.runSequence(calls, st);
}

int64_t GpuForwardPass::windowSlot(const GpuRequest& rq, int layer, int64_t pos) const {
  const int64_t row = pos % m.ringRows;
  return int64_t(rq.windowPages[size_t(layer)][size_t(row / kGpuPageTokens)]) * kGpuPageTokens +
         row % kGpuPageTokens;
}

Status GpuForwardPass::gemm(uint64_t x, int64_t ldx, const GpuMatrix& W, uint64_t y, int64_t M) {
  if (W.quantized()) return Error{"forward: a quantized weight went to the bf16 GEMM (cuBLAS); weight_gemm reads it"};
  return blas.gemmBf16F32(x, ldx, W.addr(), W.cols, y, W.rows, M, W.rows, W.cols, stream);
}

Status GpuForwardPass::project(uint64_t x, const GpuMatrix& W, uint64_t y, int64_t M, GemmEpilogue epilogue,
                               int64_t groups, const GpuMatrix* up) {
  sig += fmt::format("weight_gemm,{}x{}x{},bits{},e{},g{};", M, W.rows, W.cols, W.quant().bits, int(epilogue), groups);
  if (!launching()) return {};
  if (!W.quantized() || (up && !up->quantized()))
    return Error{"forward: a bf16 weight went to weight_gemm; cuBLAS multiplies it"};
  const DeviceQuantWeight upQ = up ? up->quant() : DeviceQuantWeight{};
  return weightGemm(ops, x, M, W.quant(), y, epilogue, stream, groups, up ? &upQ : nullptr, cfg.swigluLimit);
}

Status GpuForwardPass::routedExperts(const GpuRoutedExperts& experts, uint64_t u, uint64_t ids, uint64_t weights,
                                     int64_t k, uint64_t routed) {
  sig += fmt::format("moe_experts,T{},k{},E{};", T, k, experts.experts);
  if (!launching()) return {};
  return moeExperts(ops, u, ids, weights, T, k, experts.view(), routed, stream, cfg.swigluLimit);
}

Status GpuForwardPass::allocStreams(int64_t rows) {
  const int64_t C = cfg.hiddenSize;
  const size_t xBytes = size_t(rows * kGpuStreams * C * 2);
  DI_ASSIGN(X0, buf("X0", xBytes));
  DI_ASSIGN(X1, buf("X1", xBytes));
  DI_ASSIGN(u, buf("u", size_t(rows * C * 2)));
  DI_ASSIGN(f, buf("f", size_t(rows * C * 2)));
  DI_ASSIGN(preA, buf("preA", size_t(rows * 4 * 4)));
  DI_ASSIGN(preF, buf("preF", size_t(rows * 4 * 4)));
  DI_ASSIGN(post, buf("post", size_t(rows * 4 * 4)));
  DI_ASSIGN(comb, buf("comb", size_t(rows * 16 * 4)));
  DI_ASSIGN(sqrsum, buf("sqrsum", size_t(rows * 4)));
  st = Streams{X0, X1, u, f, preA, preF, post, comb, sqrsum};
  return {};
}

namespace {

OpAttrs mhcAttrsOf(const ModelConfig& cfg) {
  OpAttrs a;
  a.setFloat("rms_eps", cfg.rmsNormEps);
  a.setFloat("hc_eps", cfg.hcEps);
  a.setInt("sinkhorn_iters", cfg.hcSinkhornIters);
  a.setFloat("norm_eps", cfg.rmsNormEps);
  return a;
}

}  // namespace

// The pre step of a sublayer (mixes from X, the collapse with `preIn`, the norm) and the post
// step fused with the next pre step; the residual lives in st.X (ping-pong with st.Y).
Status GpuForwardPass::mhcPre(const GpuMhcWeights& hw, uint64_t preIn, uint64_t norm, uint64_t preOut) {
  const int64_t C = cfg.hiddenSize;
  std::map<std::string, DiTensor> t = {{"fn", {hw.fn.addr(), {24, 4 * C}}},   {"scale", {hw.scale.addr(), {3}}},
                                       {"base", {hw.base.addr(), {24}}},       {"pre_in", {preIn, {T, 4}}},
                                       {"norm_weight", {norm, {C}}},           {"layer_input", {st.u, {T, C}}},
                                       {"pre", {preOut, {T, 4}}},              {"post", {st.post, {T, 4}}},
                                       {"comb", {st.comb, {T, 4, 4}}},         {"x", {st.X, {T, kGpuStreams, C}}}};
  return runOp("mhc_pre", mhcAttrsOf(cfg), t, stream);
}

Status GpuForwardPass::mhcFusedPostPre(const GpuMhcWeights& hw, uint64_t preIn, uint64_t norm, uint64_t preOut) {
  const int64_t C = cfg.hiddenSize;
  std::map<std::string, DiTensor> t = {{"fn", {hw.fn.addr(), {24, 4 * C}}},   {"scale", {hw.scale.addr(), {3}}},
                                       {"base", {hw.base.addr(), {24}}},       {"pre_in", {preIn, {T, 4}}},
                                       {"norm_weight", {norm, {C}}},           {"layer_input", {st.u, {T, C}}},
                                       {"pre", {preOut, {T, 4}}},              {"post", {st.post, {T, 4}}},
                                       {"comb", {st.comb, {T, 4, 4}}},         {"f_out", {st.f, {T, C}}},
                                       {"residual", {st.X, {T, kGpuStreams, C}}}, {"x", {st.Y, {T, kGpuStreams, C}}}};
  DI_TRY(runOp("mhc_fused_post_pre", mhcAttrsOf(cfg), t, stream));
  std::swap(st.X, st.Y);
  return {};
}

Status GpuForwardPass::mhcPostOnly() {
  const int64_t C = cfg.hiddenSize;
  std::map<std::string, DiTensor> t = {{"f_out", {st.f, {T, C}}},        {"residual", {st.X, {T, kGpuStreams, C}}},
                                       {"post", {st.post, {T, 4}}},       {"comb", {st.comb, {T, 4, 4}}},
                                       {"x", {st.Y, {T, kGpuStreams, C}}}, {"sqrsum", {st.sqrsum, {T}}}};
  DI_TRY(runOp("mhc_post", {}, t, stream));
  std::swap(st.X, st.Y);
  return {};
}

// The post step after `layer`'s MoE: fused with the next layer's pre step, alone when an engram
// module runs in between, or (after the last layer) the final collapse with the last pre-mix
// and the final norm: the pre half of a fused step computes exactly rmsnorm(bf16(sum_m preF[m]
// x[m]), norm) as its layer input (its mixes, from the last FFN's parameters, are not used).
Status GpuForwardPass::postStep(int layer, bool* attnPreDone) {
  const bool last = layer + 1 == cfg.numHiddenLayers;
  if (!last && !w.layers[size_t(layer + 1)].hasEngram) {
    const GpuLayerWeights& nw = w.layers[size_t(layer + 1)];
    DI_TRY(mhcFusedPostPre(nw.hcAttn, st.preF, nw.attnNorm.addr(), st.preA));
    *attnPreDone = true;
  } else if (!last) {
    DI_TRY(mhcPostOnly());
    *attnPreDone = false;
  } else {
    DI_TRY(mhcFusedPostPre(w.layers[size_t(layer)].hcFfn, st.preF, w.norm.addr(), st.preA));
  }
  return {};
}

// A later pipeline stage starts from what the previous one sent (GpuModelImpl::forwardOnDevice
// copied it into this stage's `in.*` buffers): the residual state before the post step of the
// previous layer, then its mirrored kv sources' new entries, computed here from their inputs.
Status GpuForwardPass::receive() {
  const GpuStagePlan& sp = m.stage;
  const auto items = gpuHandoffItems(cfg, sp.recvInputs, sp.recvSelections, sp.recvKept, T);
  std::map<std::string, uint64_t> in;
  for (const GpuHandoffItem& it : items) {
    DI_ASSIGN(a, buf("in." + it.name, it.bytes));
    in[it.name] = a;
  }
  const std::pair<const char*, uint64_t> state[] = {
      {"X", st.X}, {"f", st.f}, {"post", st.post}, {"comb", st.comb}, {"preF", st.preF}};
  for (const auto& [name, dst] : state) {
    const size_t bytes = std::find_if(items.begin(), items.end(), [&](const GpuHandoffItem& i) { return i.name == name; })->bytes;
    DI_LAUNCH(copyDeviceToDevice(dst, in.at(name), bytes, stream));
  }
  for (int I : sp.recvSelections) selection[I] = in.at(fmt::format("sel.{}", I));
  if (sp.recvKept) keptBlocks = in.at("kept");
  for (int S : sp.mirroredSources) DI_TRY(compress(S, in.at(fmt::format("u.{}", S))));
  return {};
}

// The addresses of this pass's hand-off buffers, in gpuHandoffItems' order.
Result<std::vector<uint64_t>> GpuForwardPass::handoffOutputs() {
  const GpuStagePlan& sp = m.stage;
  std::vector<uint64_t> out = {st.X, st.f, st.post, st.comb, st.preF};
  for (int S : sp.sendInputs) {
    DI_ASSIGN(a, sp.owns(S) ? buf(fmt::format("out.u.{}", S), size_t(T * cfg.hiddenSize * 2))
                            : buf(fmt::format("in.u.{}", S), size_t(T * cfg.hiddenSize * 2)));
    out.push_back(a);
  }
  for (int I : sp.sendSelections) out.push_back(selection.at(I));
  if (sp.sendKept) {
    if (keptBlocks == 0) return Error{"pipeline hand-off: the candidate source's kept blocks were not computed"};
    out.push_back(keptBlocks);
  }
  return out;
}

Result<HostTensor> GpuForwardPass::run(const std::vector<int32_t>& ids) {
  const int64_t C = cfg.hiddenSize, V = cfg.vocabSize;
  const GpuStagePlan& sp = m.stage;
  const LaunchTally start = threadLaunchTally();
  launches = {};
  DI_TRY(allocStreams(T));
  DI_ASSIGN(idsDev, upload("ids", ids.data(), ids.size() * 4));
  DI_ASSIGN(posDev, upload("positions", positions.data(), positions.size() * 8));
  positionsDev = posDev;

  // Delayed mHC: the attention collapses with the previous FFN's pre-mix (preF), the FFN with
  // the attention's (preA). The FFN's post step is fused with the next layer's attention pre
  // step unless an engram module runs in between.
  bool attnPreDone = false;  // layer_input/post/comb of this layer's attention already computed
  if (sp.first()) {
    // Embedding broadcast to the 4 streams; the first collapse selects stream 0 (one-hot pre).
    if (m.tp > 1) {
      // Vocabulary rows: a token of another rank's rows reads this rank's zero row (the last);
      // the sum over the ranks (exactly one nonzero term per element) is the embedding.
      const int64_t vb = m.rank.vocabBegin, ve = m.rank.vocabEnd;
      std::vector<int32_t> local(ids.size());
      for (size_t i = 0; i < ids.size(); ++i) local[i] = ids[i] >= vb && ids[i] < ve ? int32_t(ids[i] - vb) : int32_t(ve - vb);
      DI_ASSIGN(localDev, upload("idsLocal", local.data(), local.size() * 4));
      DI_LAUNCH(mk.embedStreams(localDev, w.embed.addr(), st.X, T, C, stream));
      DI_TRY(tpAllReduce(st.X, T * kGpuStreams * C, DType::BF16));
    } else {
      DI_LAUNCH(mk.embedStreams(idsDev, w.embed.addr(), st.X, T, C, stream));
    }
    std::vector<float> oneHot(size_t(T * 4), 0.f);
    for (int64_t t = 0; t < T; ++t) oneHot[size_t(t * 4)] = 1.f;
    DI_TRY(upload("preF", oneHot.data(), oneHot.size() * 4));
  } else {
    DI_TRY(receive());
    DI_TRY(postStep(sp.layerBegin - 1, &attnPreDone));
  }
  if (features) {
    DI_ASSIGN(g, buf("dsparkG", size_t(T * int64_t(cfg.dsparkTargetLayerIds.size()) * C * 2)));
    tapFeatures = g;
  }

  for (int layer = sp.layerBegin; layer < sp.layerEnd; ++layer) {
    const GpuLayerWeights& lw = w.layers[size_t(layer)];
    const LaunchTally layerStart = threadLaunchTally();
    if (!attnPreDone) {
      if (lw.hasEngram) DI_TRY(engram(layer, st.X));
      DI_TRY(mhcPre(lw.hcAttn, st.preF, lw.attnNorm.addr(), st.preA));
    }
    // st.X now holds the streams entering this layer's block (after its engram injection).
    if (features) DI_TRY(captureTap(layer, st.X));
    DI_TRY(attention(layer, st.u, st.f));
    if (std::find(sp.sendInputs.begin(), sp.sendInputs.end(), layer) != sp.sendInputs.end()) {
      // A later stage mirrors this kv source: it gets the source's attention input.
      DI_ASSIGN(out, buf(fmt::format("out.u.{}", layer), size_t(T * C * 2)));
      DI_LAUNCH(copyDeviceToDevice(out, st.u, size_t(T * C * 2), stream));
    }
    DI_TRY(mhcFusedPostPre(lw.hcFfn, st.preA, lw.ffnNorm.addr(), st.preF));
    DI_TRY(moe(layer, st.u, st.f));
    // The last layer of an earlier stage leaves its post step to the next stage.
    if (layer + 1 < sp.layerEnd || sp.last()) DI_TRY(postStep(layer, &attnPreDone));
    launches.perLayer.push_back(threadLaunchTally() - layerStart);
  }
  if (!sp.last()) {
    auto outs = handoffOutputs();
    if (!outs.ok()) return outs.error();
    launches.total = threadLaunchTally() - start;
    outputs = std::move(*outs);
    logitsAddr = 0;
    logitsRows = 0;
    return HostTensor{};
  }
  const uint64_t hFinal = st.u;
  if (features) DI_TRY(commitFeatures());

  // The head over every row, or over each sequence's last row only.
  int64_t rows = T;
  uint64_t h = hFinal;
  if (lastRowsOnly) {
    std::vector<int32_t> last;
    for (const GpuSeq& q : seqs) last.push_back(int32_t(q.offset + q.T - 1));
    DI_ASSIGN(lastDev, upload("lastRows", last.data(), last.size() * 4));
    DI_ASSIGN(hLast, buf("hLast", size_t(R * C * 2)));
    DI_LAUNCH(mk.gatherRowsBf16(hFinal, lastDev, R, C, hLast, stream));
    rows = R;
    h = hLast;
  }
  DI_ASSIGN(logitsDev, buf("logits", size_t(rows * V * 4)));
  if (!tensorParallel()) {
    DI_LAUNCH(gemm(h, C, w.head, logitsDev, rows));
  } else {
    // Vocabulary rows: this rank's logits columns, gathered from every rank ([rank, rows, V/tp])
    // and laid out as [rows, V].
    const int64_t Vr = w.head.rows, n = m.tp;
    DI_ASSIGN(part, buf("logitsPartial", size_t(rows * Vr * 4)));
    DI_ASSIGN(all, buf("logitsGathered", size_t(n * rows * Vr * 4)));
    DI_LAUNCH(gemm(h, C, w.head, part, rows));
    DI_TRY(tpCollective({TpOp::AllGather, part, all, size_t(rows * Vr), DType::F32}));
    // Rank r's block [rows, Vr] becomes columns [r * Vr, (r + 1) * Vr) of every row: one pitched copy.
    for (int64_t r = 0; r < n; ++r)
      DI_LAUNCH(copyDevice2D(logitsDev + uint64_t(r * Vr * 4), size_t(V * 4), all + uint64_t(r * rows * Vr * 4),
                             size_t(Vr * 4), size_t(Vr * 4), size_t(rows), stream));
  }
  launches.total = threadLaunchTally() - start;
  ++m.counters.forwards;
  m.counters.tokens += T;
  logitsAddr = logitsDev;
  logitsRows = rows;
  outputs = {logitsDev};
  if (mode != Mode::Eager || !hostLogits) return HostTensor{};  // the caller reads logitsAddr
  HostTensor logits(DType::F32, {rows, V});
  DI_TRY(copyDeviceToHost(logits.bytes.data(), logitsDev, logits.bytes.size(), stream));
  return logits;
}

}  // namespace deepinfer
