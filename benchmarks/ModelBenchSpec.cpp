#include "ModelBenchSpec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ModelBenchMeasure.h"
#include "ReportText.h"
#include "model/Sampling.h"

namespace deepinfer::bench {
namespace {

// JSON numbers (non-finite: null) and errors.
std::string num(double v) { return std::isfinite(v) ? fmt::format("{:.6g}", v) : "null"; }
std::string err(const std::string& e) { return e.empty() ? "null" : js(e); }

int32_t argmaxOf(const float* row, int64_t V) { return sampleToken(row, V, SamplingOptions{}, 0); }

// S streams: their prompts and the target's greedy continuation (plain one-row decoding), long enough
// for `steps` steps that each emit up to B + 1 tokens.
struct Streams {
  std::vector<std::vector<int32_t>> prompts, continuation;
};

Result<Streams> makeStreams(GpuModel& model, int S, int steps, const ModelBenchOptions& opts, std::mt19937_64& rng) {
  const int64_t V = model.config().vocabSize, B = model.draftBlockSize();
  Streams st;
  std::vector<int64_t> reqs;
  std::uniform_int_distribution<int32_t> d(0, int32_t(V - 1));
  auto cleanup = [&] {
    for (int64_t r : reqs) (void)model.releaseRequest(r);
  };
  for (int s = 0; s < S; ++s) {
    std::vector<int32_t> p(size_t(opts.promptTokens));
    for (auto& t : p) t = d(rng);
    st.prompts.push_back(p);
    auto r = model.newRequest();
    if (!r.ok()) {
      cleanup();
      return r.error();
    }
    reqs.push_back(*r);
    for (size_t at = 0; at < p.size(); at += size_t(opts.chunk)) {
      std::vector<int32_t> part(p.begin() + int64_t(at), p.begin() + int64_t(std::min(p.size(), at + size_t(opts.chunk))));
      auto l = model.prefill(*r, part, true);
      if (!l.ok()) {
        cleanup();
        return l.error();
      }
      if (at + part.size() == p.size()) st.continuation.push_back({argmaxOf(l->ptr<float>(), V)});
    }
  }
  // One-row decode steps, stream by stream: a verify step computes every row like a one-row
  // decode (bit-identical, GpuSpeculativeTest), while a batched decode's rows round differently
  // and flip near-ties, which would make the oracle's drafts wrong where they should be right.
  const int64_t need = int64_t(steps) * (B + 1) + B + 2;
  for (int s = 0; s < S; ++s) {
    std::vector<int32_t>& c = st.continuation[size_t(s)];
    while (int64_t(c.size()) < need) {
      auto l = model.decode(reqs[size_t(s)], c.back());
      if (!l.ok()) {
        cleanup();
        return l.error();
      }
      c.push_back(argmaxOf(l->data(), V));
    }
  }
  cleanup();
  return st;
}

// One timed measurement: fresh speculative requests per repetition, one untimed step (graph
// capture), then `steps` timed steps of `kind`.
SpecRow measure(GpuModel& model, const Streams& st, int S, const std::string& kind, int target,
                const ModelBenchOptions& opts) {
  const int64_t V = model.config().vocabSize, B = model.draftBlockSize();
  SpecRow row;
  row.streams = S;
  row.kind = kind;
  row.target = target;
  row.steps = opts.decodeSteps;
  std::vector<double> times;
  int64_t accepted = 0, stepsDone = 0;
  for (int rep = 0; rep < opts.repeats && row.error.empty(); ++rep) {
    std::vector<int64_t> reqs;
    std::vector<int64_t> emitted(size_t(S), 1);  // tokens of the continuation emitted so far
    auto fail = [&](const Error& e) {
      row.error = e.message;
      for (int64_t r : reqs) (void)model.releaseRequest(r);
    };
    bool ok = true;
    for (int s = 0; s < S && ok; ++s) {
      auto r = model.newSpeculativeRequest();
      if (!r.ok()) {
        fail(r.error());
        ok = false;
        break;
      }
      reqs.push_back(*r);
      const auto& p = st.prompts[size_t(s)];
      for (size_t at = 0; at < p.size() && ok; at += size_t(opts.chunk)) {
        std::vector<int32_t> part(p.begin() + int64_t(at),
                                  p.begin() + int64_t(std::min(p.size(), at + size_t(opts.chunk))));
        if (auto l = model.prefill(*r, part, true); !l.ok()) {
          fail(l.error());
          ok = false;
        }
      }
    }
    if (!ok) break;
    std::vector<int32_t> anchor(static_cast<size_t>(S));
    for (int s = 0; s < S; ++s) anchor[size_t(s)] = st.continuation[size_t(s)][0];
    auto step = [&](bool timed) -> Status {
      if (kind == "draft") {
        std::vector<std::pair<int64_t, int32_t>> a;
        for (int s = 0; s < S; ++s) a.push_back({reqs[size_t(s)], anchor[size_t(s)]});
        auto d = model.draft(a, /*wantZ=*/false);
        return d.ok() ? Status{} : Status{d.error()};
      }
      std::vector<GpuSpecStep> steps;
      for (int s = 0; s < S; ++s) {
        GpuSpecStep g;
        g.request = reqs[size_t(s)];
        g.next = anchor[size_t(s)];
        if (kind == "plain") g.maxDrafts = 0;
        if (kind == "oracle") {
          const auto& c = st.continuation[size_t(s)];
          const int64_t at = emitted[size_t(s)];
          g.draftOverride.assign(c.begin() + at, c.begin() + at + B);
          if (target < B) g.draftOverride[size_t(target)] = (g.draftOverride[size_t(target)] + 1) % int32_t(V);
        }
        steps.push_back(std::move(g));
      }
      auto out = model.speculativeStep(steps);
      if (!out.ok()) return out.error();
      for (int s = 0; s < S; ++s) {
        const GpuSpecOutcome& o = (*out)[size_t(s)];
        anchor[size_t(s)] = o.emitted.back();
        emitted[size_t(s)] += int64_t(o.emitted.size());
        if (timed) accepted += o.accepted;
      }
      if (timed) ++stepsDone;
      return {};
    };
    if (Status s = step(false); !s.ok()) {
      fail(s.error());
      break;
    }
    const auto t0 = Clock::now();
    for (int i = 0; i < opts.decodeSteps && row.error.empty(); ++i)
      if (Status s = step(true); !s.ok()) fail(s.error());
    if (!row.error.empty()) break;
    times.push_back(secondsSince(t0) / double(opts.decodeSteps));
    for (int64_t r : reqs) (void)model.releaseRequest(r);
  }
  row.stepMs = medianOf(times) * 1e3;
  row.meanAccepted = stepsDone > 0 ? double(accepted) / double(stepsDone * S) : 0;
  if (row.stepMs > 0 && kind != "draft") row.tokPerS = double(S) * (row.meanAccepted + 1) / (row.stepMs * 1e-3);
  return row;
}

}  // namespace

std::vector<SpecRow> measureSpeculative(GpuModel& model, const ModelBenchOptions& opts, std::mt19937_64& rng) {
  std::vector<SpecRow> rows;
  const int B = model.draftBlockSize();
  for (int S : opts.streams) {
    auto st = makeStreams(model, S, opts.decodeSteps + 1, opts, rng);
    if (!st.ok()) {
      SpecRow r;
      r.streams = S;
      r.kind = "setup";
      r.error = st.error().message;
      rows.push_back(r);
      continue;
    }
    const size_t first = rows.size();
    rows.push_back(measure(model, *st, S, "plain", -1, opts));
    rows.push_back(measure(model, *st, S, "draft", -1, opts));
    for (int a = 0; a <= B; ++a) rows.push_back(measure(model, *st, S, "oracle", a, opts));
    rows.push_back(measure(model, *st, S, "model", -1, opts));
    // An oracle step's tok/s includes the draft pass it would need (measured alone above).
    const double draftMs = rows[first + 1].stepMs;
    for (size_t i = first; i < rows.size(); ++i) {
      SpecRow& r = rows[i];
      if (r.kind == "oracle" && r.stepMs > 0)
        r.tokPerS = double(S) * (r.meanAccepted + 1) / ((r.stepMs + draftMs) * 1e-3);
      const std::string what = r.kind == "oracle" ? fmt::format("oracle, {} of {} right", r.target, B) : r.kind;
      if (r.error.empty())
        fmt::print("speculative {} stream(s), {}: {:.2f} ms per step, {:.2f} accepted, {:.1f} tok/s\n", S, what,
                   r.stepMs, r.meanAccepted, r.tokPerS);
      else
        fmt::print("speculative {} stream(s), {}: ERROR {}\n", S, what, r.error);
    }
    std::fflush(stdout);
  }
  return rows;
}

void printSpecRows(const std::vector<SpecRow>& rows, int blockSize) {
  if (rows.empty()) return;
  fmt::print("\nspeculative decoding (DSpark, block {}): per step of all streams\n", blockSize);
  fmt::print("{:>8} {:>22} {:>10} {:>10} {:>10} {:>12}\n", "streams", "step", "ms/step", "accepted", "tok/s",
             "vs plain");
  double plainMs = 0;
  for (const SpecRow& r : rows) {
    if (r.kind == "plain") plainMs = r.stepMs;
    const std::string what = r.kind == "oracle" ? fmt::format("oracle a={}", r.target)
                             : r.kind == "plain" ? "plain (no drafts)"
                             : r.kind == "draft" ? "draft pass alone"
                             : r.kind == "model" ? "model drafts" : r.kind;
    if (!r.error.empty()) {
      fmt::print("{:>8} {:>22} ERROR {}\n", r.streams, what, r.error);
      continue;
    }
    fmt::print("{:>8} {:>22} {:>10.2f} {:>10.2f} {:>10.1f} {:>11.2f}x\n", r.streams, what, r.stepMs, r.meanAccepted,
               r.tokPerS, plainMs > 0 ? r.stepMs / plainMs : 0.0);
  }
  fmt::print("  oracle a: the target's own greedy continuation as drafts with draft a+1 wrong (a = {}: all right); "
             "its tok/s adds one draft pass per step. 'model drafts': the draft heads' own drafts (random "
             "weights: expect ~0 accepted).\n",
             blockSize);
}

std::string specRowsJson(const std::vector<SpecRow>& rows) {
  std::string o = "[";
  for (size_t i = 0; i < rows.size(); ++i) {
    const SpecRow& r = rows[i];
    o += fmt::format(
        "{}\n    {{\"streams\": {}, \"kind\": {}, \"accepted_by_construction\": {}, \"steps\": {}, \"step_ms\": {}, "
        "\"mean_accepted\": {}, \"tok_s\": {}, \"error\": {}}}",
        i ? "," : "", r.streams, js(r.kind), r.target, r.steps, num(r.stepMs), num(r.meanAccepted), num(r.tokPerS),
        err(r.error));
  }
  return o + "\n  ]";
}

}  // namespace deepinfer::bench
