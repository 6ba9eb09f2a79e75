// Embedding deepinfer-jit in an engine (C++ API): load a model, run two requests of different
// lengths through continuous steps on a stream the engine owns, print their tokens, and launch
// one `di` op (the top-k) on buffers the engine allocated itself.
//
//   embed_engine MODEL_DIR        (e.g. a model from `deepinfer-jit make-model --preset tiny`)
#include <cstdio>
#include <vector>

#include "deepinfer/Device.h"
#include "deepinfer/Engine.h"

using namespace deepinfer;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR\n", argv[0]);
    return 2;
  }
  // The engine API needs a GPU. Without one, say so and exit 77: "skipped", which the test that
  // runs this example reports as such (any other failure is an error, exit 1).
  if (auto dev = Device::open(0); !dev.ok()) {
    std::printf("embed_engine: no GPU, skipped: %s\n", dev.error().message.c_str());
    return 77;
  }
  auto engine = Engine::create({});
  if (!engine.ok()) {
    std::fprintf(stderr, "embed_engine: %s\n", engine.error().message.c_str());
    return 1;
  }
  Engine& e = **engine;
  if (auto st = e.loadModel(argv[1]); !st.ok()) {
    std::fprintf(stderr, "embed_engine: %s\n", st.error().message.c_str());
    return 1;
  }
  auto stream = Stream::create();
  if (!stream.ok()) return 1;
  RequestParams a, b;
  a.prompt = {5, 6, 7, 8, 9, 10, 11};
  a.maxNewTokens = 8;
  b.prompt = {42, 43};
  b.maxNewTokens = 5;
  b.temperature = 0.7;
  b.topP = 0.9;
  b.seed = 1;
  auto ra = e.addRequest(a), rb = e.addRequest(b);
  if (!ra.ok() || !rb.ok()) return 1;
  while (!e.finished(*ra) || !e.finished(*rb)) {
    auto events = e.step(stream->handle());
    if (!events.ok()) {
      std::fprintf(stderr, "embed_engine: %s\n", events.error().message.c_str());
      return 1;
    }
  }
  for (int64_t r : {*ra, *rb}) {
    std::printf("request %lld:", static_cast<long long>(r));
    for (int32_t t : e.tokens(r)) std::printf(" %d", t);
    std::printf("\n");
    (void)e.removeRequest(r);
  }

  // Kernel level: top-4 of two rows of 8 scores, on buffers owned by the caller.
  const std::vector<float> scores = {1, 7, 3, 9, 2, 8, 0, 5, 4, 4, 6, 1, 9, 2, 3, 7};
  const std::vector<int32_t> lens = {8, 6};
  auto s = DeviceBuffer::alloc(scores.size() * 4), l = DeviceBuffer::alloc(8), out = DeviceBuffer::alloc(8 * 4);
  if (!s.ok() || !l.ok() || !out.ok()) return 1;
  (void)s->upload(scores.data(), scores.size() * 4);
  (void)l->upload(lens.data(), 8);
  OpAttrs attrs;
  attrs.setInt("k", 4);
  auto st = e.runOp("topk", attrs,
                    {{"scores", {s->addr(), {2, 8}}}, {"lens", {l->addr(), {2}}}, {"indices", {out->addr(), {2, 4}}}},
                    stream->handle());
  if (!st.ok() || !stream->synchronize().ok()) {
    std::fprintf(stderr, "embed_engine: topk: %s\n", st.ok() ? "sync failed" : st.error().message.c_str());
    return 1;
  }
  int32_t idx[8];
  (void)out->download(idx, sizeof(idx));
  std::printf("topk rows: %d %d %d %d | %d %d %d %d\n", idx[0], idx[1], idx[2], idx[3], idx[4], idx[5], idx[6], idx[7]);
  return 0;
}
