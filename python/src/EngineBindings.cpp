// The engine from Python (runtime/include/deepinfer/Engine.h): a model on one GPU (or pipeline
// stages over several, or over logical devices of one), requests that
// join and leave between steps, a step on the caller's stream, tokens, and the last step's logits
// as a DLPack device tensor that aliases the engine's memory (valid until the next step).
#include <fmt/format.h>

#include <cstring>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "Bindings.h"
#include "Tensors.h"
#include "deepinfer/Engine.h"
#include "model/MakeModel.h"

namespace deepinfer::py {
namespace {

class PyEngine {
 public:
  PyEngine(const std::string& backend, int threads, int device, const std::string& target, int64_t kvCacheBytes,
           int maxRequests, int64_t maxChunkTokens, bool speculative, int pp, int tp, const std::vector<int>& stageLayers,
           const std::vector<int>& gpus) {
    EngineOptions o;
    o.pp = pp;
    o.tp = tp;
    o.stageLayers = stageLayers;
    o.gpus = gpus;
    o.backend = backend;
    o.threads = threads;
    o.device = device;
    o.target = target;
    o.kvCacheBytes = kvCacheBytes;
    o.maxRequests = maxRequests;
    o.maxChunkTokens = maxChunkTokens;
    o.speculative = speculative;
    if (maxRequests < 1) throw DiError(fmt::format("engine: max_requests {} < 1", maxRequests));
    if (maxChunkTokens < 1) throw DiError(fmt::format("engine: max_chunk_tokens {} < 1", maxChunkTokens));
    if (kvCacheBytes < 0) throw DiError(fmt::format("engine: kv_cache_bytes {} < 0", kvCacheBytes));
    engine_ = take(Engine::create(o));
    device_ = device;
  }
  Engine& e() {
    if (!engine_) throw DiError("engine: closed");
    return *engine_;
  }
  int device() const { return device_; }
  void close() { engine_.reset(); }

 private:
  std::unique_ptr<Engine> engine_;
  int device_ = 0;
};

nb::object stepLogits(nb::handle self) {
  PyEngine& pe = nb::cast<PyEngine&>(self);
  const TensorView v = take(pe.e().stepLogits());
  // The owner is the Python engine: the memory stays allocated while the array lives (its
  // contents are only valid until the next step).
  return exportArray(reinterpret_cast<void*>(v.addr), v.shape, self, nb::dtype<float>(), kDlCuda, pe.device());
}

}  // namespace

void bindEngine(nb::module_& m) {
  nb::class_<PyEngine>(m, "Engine")
      .def(nb::init<const std::string&, int, int, const std::string&, int64_t, int, int64_t, bool, int, int,
                    const std::vector<int>&, const std::vector<int>&>(),
           nb::arg("backend"), nb::arg("threads"), nb::arg("device"), nb::arg("target"), nb::arg("kv_cache_bytes"),
           nb::arg("max_requests"), nb::arg("max_chunk_tokens"), nb::arg("speculative"), nb::arg("pp") = 1,
           nb::arg("tp") = 1, nb::arg("stage_layers") = std::vector<int>{}, nb::arg("gpus") = std::vector<int>{})
      .def("load_model",
           [](PyEngine& pe, const std::string& dir) {
             Engine& e = pe.e();
             Status s;
             {
               nb::gil_scoped_release nogil;
               s = e.loadModel(dir);
             }
             check(s);
           })
      .def("has_model", [](PyEngine& pe) { return pe.e().hasModel(); })
      .def("vocab_size", [](PyEngine& pe) { return pe.e().vocabSize(); })
      .def("kv_capacity_tokens", [](PyEngine& pe) { return pe.e().kvCapacityTokens(); })
      .def("describe", [](PyEngine& pe) { return pe.e().describe(); })
      .def("live_requests", [](PyEngine& pe) { return pe.e().liveRequests(); })
      .def("add_request",
           [](PyEngine& pe, const std::vector<int32_t>& prompt, int64_t maxNew, double temperature, double topP,
              uint64_t seed, bool keepLogits) {
             RequestParams p;
             p.prompt = prompt;
             p.maxNewTokens = maxNew;
             p.temperature = temperature;
             p.topP = topP;
             p.seed = seed;
             p.keepLogits = keepLogits;
             return take(pe.e().addRequest(p));
           })
      .def("remove_request", [](PyEngine& pe, int64_t id) { check(pe.e().removeRequest(id)); })
      .def("step",
           [](PyEngine& pe, uintptr_t stream) {
             Engine& e = pe.e();
             Result<std::vector<StepEvent>> r = Error{""};
             {
               nb::gil_scoped_release nogil;
               r = e.step(reinterpret_cast<void*>(stream));
             }
             nb::list out;
             for (const StepEvent& ev : take(std::move(r)))
               out.append(nb::make_tuple(ev.request, ev.token, ev.finished, ev.tokens, ev.accepted));
             return out;
           })
      .def("finished", [](PyEngine& pe, int64_t id) { return pe.e().finished(id); })
      .def("tokens", [](PyEngine& pe, int64_t id) { return pe.e().tokens(id); })
      .def("last_logits",
           [](PyEngine& pe, int64_t id) {
             std::vector<float> v = take(pe.e().lastLogits(id));
             HostTensor t(DType::F32, {int64_t(v.size())});
             std::memcpy(t.bytes.data(), v.data(), v.size() * sizeof(float));
             return hostTensorToArray(std::move(t));
           })
      .def("step_logits", &stepLogits)
      .def("device", &PyEngine::device)
      .def("close", &PyEngine::close);

  m.def(
      "make_model",
      [](const std::string& preset, const std::string& out, uint64_t seed) {
        MakeModelOptions o;
        o.preset = preset;
        o.outDir = out;
        o.seed = seed;
        Status s;
        {
          nb::gil_scoped_release nogil;
          s = makeModel(o);
        }
        check(s);
      },
      nb::arg("preset"), nb::arg("out"), nb::arg("seed"));
}

}  // namespace deepinfer::py
