/* Embedding deepinfer-jit through its C API: one greedy request on the default stream.
 *   embed_engine_c MODEL_DIR */
#include <stdio.h>

#include "deepinfer/deepinfer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MODEL_DIR\n", argv[0]);
    return 2;
  }
  /* No GPU: say so and exit 77 ("skipped"); any other failure is an error (exit 1). */
  if (!di_device_available(0)) {
    printf("embed_engine_c: no GPU, skipped: %s\n", di_last_error());
    return 77;
  }
  di_engine* e = NULL;
  if (di_engine_create(NULL, &e) != 0) {
    fprintf(stderr, "embed_engine_c: %s\n", di_last_error());
    return 1;
  }
  if (di_engine_load_model(e, argv[1]) != 0) {
    fprintf(stderr, "embed_engine_c: %s\n", di_last_error());
    di_engine_destroy(e);
    return 1;
  }
  const int32_t prompt[] = {5, 6, 7, 8};
  int64_t req = 0;
  if (di_request_add(e, prompt, 4, 6, 0.0, 1.0, 0, &req) != 0) {
    fprintf(stderr, "embed_engine_c: %s\n", di_last_error());
    di_engine_destroy(e);
    return 1;
  }
  while (!di_request_finished(e, req)) {
    di_step_event ev[4];
    size_t n = 0;
    if (di_engine_step(e, NULL, ev, 4, &n) != 0) {
      fprintf(stderr, "embed_engine_c: %s\n", di_last_error());
      di_engine_destroy(e);
      return 1;
    }
  }
  int32_t tokens[16];
  size_t count = 0;
  di_request_tokens(e, req, tokens, 16, &count);
  printf("request %lld:", (long long)req);
  for (size_t i = 0; i < count && i < 16; ++i) printf(" %d", tokens[i]);
  printf("\n");
  di_request_remove(e, req);
  di_engine_destroy(e);
  return 0;
}
