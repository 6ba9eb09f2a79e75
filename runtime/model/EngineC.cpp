// The C API (deepinfer.h) over deepinfer::Engine: errors become -1 plus a thread-local message.
#include <algorithm>
#include <cstring>
#include <string>

#include "deepinfer/Device.h"
#include "deepinfer/Engine.h"
#include "deepinfer/deepinfer.h"

struct di_engine {
  std::unique_ptr<deepinfer::Engine> e;
};

namespace {
thread_local std::string lastError;

int fail(const std::string& msg) {
  lastError = msg;
  return -1;
}
int check(const deepinfer::Status& st) { return st.ok() ? 0 : fail(st.error().message); }
}  // namespace

extern "C" {

const char* di_last_error(void) { return lastError.c_str(); }

int di_device_available(int device) {
  auto d = deepinfer::Device::open(device);
  if (!d.ok()) return fail(d.error().message), 0;
  return 1;
}

int di_engine_create(const di_engine_options* opts, di_engine** out) {
  if (!out) return fail("di_engine_create: out is NULL");
  *out = nullptr;
  deepinfer::EngineOptions o;
  if (opts) {
    o.device = opts->device;
    o.target = opts->target ? opts->target : "";
    o.kvCacheBytes = opts->kv_cache_bytes;
    if (opts->max_requests > 0) o.maxRequests = opts->max_requests;
    if (opts->max_chunk_tokens > 0) o.maxChunkTokens = opts->max_chunk_tokens;
    o.speculative = opts->no_speculative == 0;
    if (opts->backend && *opts->backend) o.backend = opts->backend;
    o.threads = opts->threads;
    if (opts->pp < 0) return fail(std::string("di_engine_create: pp ") + std::to_string(opts->pp) + " < 0");
    if (opts->tp < 0) return fail(std::string("di_engine_create: tp ") + std::to_string(opts->tp) + " < 0");
    if (opts->pp > 0) o.pp = opts->pp;
    if (opts->tp > 0) o.tp = opts->tp;
    if (opts->stage_layers) o.stageLayers.assign(opts->stage_layers, opts->stage_layers + o.pp);
    if (opts->gpus) o.gpus.assign(opts->gpus, opts->gpus + o.pp);
  }
  auto e = deepinfer::Engine::create(o);
  if (!e.ok()) return fail(e.error().message);
  *out = new di_engine{std::move(*e)};
  return 0;
}

void di_engine_destroy(di_engine* e) { delete e; }

int di_engine_load_model(di_engine* e, const char* dir) {
  if (!e || !dir) return fail("di_engine_load_model: NULL argument");
  return check(e->e->loadModel(dir));
}

int64_t di_engine_vocab_size(const di_engine* e) { return e ? e->e->vocabSize() : 0; }

int di_engine_describe(const di_engine* e, char* buf, size_t cap, size_t* len_out) {
  if (!e) return fail("di_engine_describe: engine is NULL");
  const std::string d = e->e->describe();
  if (len_out) *len_out = d.size();
  if (buf && cap > 0) {
    const size_t n = std::min(cap - 1, d.size());
    std::memcpy(buf, d.data(), n);
    buf[n] = '\0';
  }
  return 0;
}

int di_request_add(di_engine* e, const int32_t* prompt, size_t len, int64_t maxNew, double temperature, double topP,
                   uint64_t seed, int64_t* out) {
  if (!e || !out || (!prompt && len > 0)) return fail("di_request_add: NULL argument");
  deepinfer::RequestParams p;
  p.prompt.assign(prompt, prompt + len);
  p.maxNewTokens = maxNew;
  p.temperature = temperature;
  p.topP = topP;
  p.seed = seed;
  auto id = e->e->addRequest(p);
  if (!id.ok()) return fail(id.error().message);
  *out = *id;
  return 0;
}

int di_request_remove(di_engine* e, int64_t request) {
  if (!e) return fail("di_request_remove: NULL engine");
  return check(e->e->removeRequest(request));
}

int di_request_finished(const di_engine* e, int64_t request) { return e && e->e->finished(request) ? 1 : 0; }

int di_request_tokens(const di_engine* e, int64_t request, int32_t* tokens, size_t cap, size_t* count) {
  if (!e || !count) return fail("di_request_tokens: NULL argument");
  const auto t = e->e->tokens(request);
  *count = t.size();
  if (tokens) std::memcpy(tokens, t.data(), std::min(cap, t.size()) * sizeof(int32_t));
  return 0;
}

int di_engine_step(di_engine* e, void* stream, di_step_event* events, size_t cap, size_t* count) {
  if (!e || !count) return fail("di_engine_step: NULL argument");
  auto ev = e->e->step(stream);
  if (!ev.ok()) return fail(ev.error().message);
  *count = ev->size();
  for (size_t i = 0; i < ev->size() && i < cap && events; ++i)
    events[i] = di_step_event{(*ev)[i].request, (*ev)[i].token, (*ev)[i].finished ? 1 : 0,
                              int32_t((*ev)[i].tokens.size()), int32_t((*ev)[i].accepted)};
  return 0;
}

int di_engine_speculation_stats(const di_engine* e, int64_t* steps, int64_t* drafted, int64_t* accepted) {
  if (!e) return fail("di_engine_speculation_stats: NULL engine");
  const deepinfer::SpeculationStats s = e->e->speculationStats();
  if (steps) *steps = s.steps;
  if (drafted) *drafted = s.drafted;
  if (accepted) *accepted = s.accepted;
  return 0;
}

int di_run_op(di_engine* e, const char* op, size_t n, const char* const* names, const uint64_t* addrs,
              const int64_t* const* dims, const int* ranks, size_t nAttrs, const char* const* attrNames,
              const double* attrValues, const int* attrIsInt, void* stream) {
  if (!e || !op || (n > 0 && (!names || !addrs || !dims || !ranks)) ||
      (nAttrs > 0 && (!attrNames || !attrValues || !attrIsInt)))
    return fail("di_run_op: NULL argument");
  std::map<std::string, deepinfer::EngineTensor> t;
  for (size_t i = 0; i < n; ++i) {
    if (ranks[i] < 0 || ranks[i] > 8) return fail(std::string("di_run_op: bad rank for tensor ") + names[i]);
    t[names[i]] = deepinfer::EngineTensor{addrs[i], std::vector<int64_t>(dims[i], dims[i] + ranks[i])};
  }
  deepinfer::OpAttrs a;
  for (size_t i = 0; i < nAttrs; ++i) {
    if (attrIsInt[i]) a.setInt(attrNames[i], int64_t(attrValues[i]));
    else a.setFloat(attrNames[i], attrValues[i]);
  }
  return check(e->e->runOp(op, a, t, stream));
}

}  // extern "C"
