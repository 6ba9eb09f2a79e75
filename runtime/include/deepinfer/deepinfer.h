/* The C API of the deepinfer-jit engine (see Engine.h for the C++ one). Every call returns 0 on
 * success or -1 on failure; di_last_error() then describes the failure (thread-local; valid
 * until the next call on this thread). Streams are CUstream values passed as void*. */
#ifndef DEEPINFER_H
#define DEEPINFER_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct di_engine di_engine;

typedef struct di_engine_options {
  int device;
  const char* target;        /* NULL or "" = the GPU's own arch; "sm_80", "sm_86": their PTX */
  int64_t kv_cache_bytes;    /* 0 = half of the free device memory */
  int max_requests;          /* 0 = 16 */
  int64_t max_chunk_tokens;  /* 0 = 256 */
  int no_speculative;        /* 0 = DSpark speculative decoding when the model has draft layers */
  const char* backend;       /* NULL or "" = "cuda" (generated kernels); "cpu" = the C++ reference */
  int threads;               /* cpu backend: worker threads (0 = all hardware threads) */
  int pp;                    /* pipeline stages over layer ranges (0 = 1) */
  int tp;                    /* tensor-parallel ranks per stage (0 = 1; > 1 is not built yet: an error) */
  const int* stage_layers;   /* NULL = an even split; else pp layer counts */
  const int* gpus;           /* NULL = the default placement (Engine.h); else pp device ordinals */
} di_engine_options;

typedef struct di_step_event {
  int64_t request;
  int32_t token;             /* the newest token of the step; -1: the step ran a prefill chunk only */
  int32_t finished;
  int32_t n_tokens;          /* tokens the step produced (speculative steps: 1 .. block + 1) */
  int32_t accepted;          /* speculative steps: drafts accepted */
} di_step_event;

const char* di_last_error(void);

/* 1 when GPU `device` can be used, else 0 with di_last_error() saying why (no driver, no device). */
int di_device_available(int device);

int di_engine_create(const di_engine_options* opts, di_engine** out);
void di_engine_destroy(di_engine* e);
int di_engine_load_model(di_engine* e, const char* model_dir);
int64_t di_engine_vocab_size(const di_engine* e);
/* Engine::describe(): the backend, KV capacity and, with pipeline stages or tensor ranks, each
 * rank's layers, GPU, weights and KV capacity, then per GPU and in total. Copies up to cap - 1 bytes and a NUL; *len_out = the full length. */
int di_engine_describe(const di_engine* e, char* buf, size_t cap, size_t* len_out);

int di_request_add(di_engine* e, const int32_t* prompt, size_t prompt_len, int64_t max_new_tokens,
                   double temperature, double top_p, uint64_t seed, int64_t* request_out);
int di_request_remove(di_engine* e, int64_t request);
int di_request_finished(const di_engine* e, int64_t request);
/* Copies up to `cap` generated tokens; *count_out = how many were generated so far. */
int di_request_tokens(const di_engine* e, int64_t request, int32_t* tokens, size_t cap, size_t* count_out);

/* One step on `stream`; writes up to `cap` events, *count_out = events of this step. */
int di_engine_step(di_engine* e, void* stream, di_step_event* events, size_t cap, size_t* count_out);

/* Totals of the speculative steps so far: steps, drafts verified, drafts accepted (any may be
 * NULL). Mean accepted tokens per step = accepted / steps. */
int di_engine_speculation_stats(const di_engine* e, int64_t* steps, int64_t* drafted, int64_t* accepted);

/* One `di` op on device buffers: tensors by canonical name with their shapes (dims[i] points at
 * ranks[i] values); integer and float attributes by name. */
int di_run_op(di_engine* e, const char* op, size_t n_tensors, const char* const* names, const uint64_t* addrs,
              const int64_t* const* dims, const int* ranks, size_t n_attrs, const char* const* attr_names,
              const double* attr_values, const int* attr_is_int, void* stream);

#ifdef __cplusplus
}
#endif
#endif
