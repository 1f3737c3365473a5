// llama.cpp as an oracle for meganeura's GGUF path, built by scripts/install-llamacpp.sh against the prebuilt
// CPU libraries of npm's @node-llama-cpp/linux-x64 and the llama.h of the same release. Opt-in; never in CI.
//
//   llamacpp_oracle BINS_DIR tokenize MODEL.gguf IN.hex OUT.txt
//       IN: one UTF-8 string per line, hex-encoded. OUT: one line per string, its ids (add_special and
//       parse_special on, as meganeura's Tokenizer::encode defaults).
//   llamacpp_oracle BINS_DIR generate MODEL.gguf IN.ids STEPS OUT.txt OUT_LOGITS.f32
//       IN: one prompt per line as token ids. Greedy generation of STEPS tokens per prompt (a fresh KV cache
//       each). OUT: per prompt "prompt K", then per step "step id top1_logit top2_logit second_id". OUT_LOGITS:
//       the prompt's last-position logits (vocab f32 values) per prompt, in order.
//       An optional last argument, a comma-separated list: "kv32" keeps the KV cache in f32 (llama.cpp's
//       default is f16), "all" writes every step's logits to OUT_LOGITS (STEPS rows per prompt), not only the
//       prompt's last position. "gpu" puts every layer on the device (a GPU backend in BINS_DIR: the Vulkan
//       libraries of scripts/device/stage-llamacpp.sh, which run on lavapipe too); with GGML_VK_DISABLE_F16=1 and
//       GGML_VK_DISABLE_INTEGER_DOT_PRODUCT=1 in the environment its products take f32 activations against the
//       dequantized weights, where the CPU backend rounds activations to 8 bits for quantized weights.
//   llamacpp_oracle BINS_DIR bench MODEL.gguf PP TG REPS
//       llama-bench's two figures with every layer on the device (a GPU backend in BINS_DIR when there is one):
//       prompt processing of PP random tokens in one batch, and generation of TG tokens one at a time, each
//       REPS times after 0.3 s of warm-up runs; prints "pp PP t/s ..." and "tg TG t/s ..." (median, min, max).
#define _POSIX_C_SOURCE 200809L
#include <ggml-backend.h>
#include <llama.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void die(const char* what) {
  fprintf(stderr, "llamacpp_oracle: %s\n", what);
  exit(1);
}

static int hexval(int c) { return c <= '9' ? c - '0' : (c | 32) - 'a' + 10; }

static void quiet(enum ggml_log_level level, const char* text, void* user) {
  (void)user;
  if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static struct llama_model* load_on(const char* bins, const char* path, int gpu_layers) {
  llama_log_set(quiet, NULL);
  ggml_backend_load_all_from_path(bins);
  llama_backend_init();
  struct llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = gpu_layers;
  struct llama_model* m = llama_model_load_from_file(path, mp);
  if (!m) die("cannot load the model");
  return m;
}

static struct llama_model* load(const char* bins, const char* path) { return load_on(bins, path, 0); }

static int tokenize(const char* bins, const char* model, const char* in, const char* out) {
  struct llama_model* m = load(bins, model);
  const struct llama_vocab* v = llama_model_get_vocab(m);
  FILE* fi = fopen(in, "r");
  FILE* fo = fopen(out, "w");
  if (!fi || !fo) die("cannot open the input or output");
  size_t cap = 1 << 20;
  char* line = malloc(cap);
  char* text = malloc(cap);
  llama_token* ids = malloc(sizeof(llama_token) * cap);
  while (fgets(line, (int)cap, fi)) {
    size_t n = strcspn(line, "\r\n"), k = 0;
    for (size_t i = 0; i + 2 <= n; i += 2) text[k++] = (char)(hexval(line[i]) * 16 + hexval(line[i + 1]));
    int32_t c = llama_tokenize(v, text, (int32_t)k, ids, (int32_t)cap, true, true);
    if (c < 0) die("tokenize: output too long");
    for (int32_t i = 0; i < c; ++i) fprintf(fo, i ? " %d" : "%d", ids[i]);
    fputc('\n', fo);
  }
  fclose(fo);
  fclose(fi);
  return 0;
}

static int generate(const char* bins, const char* model, const char* in, int steps, const char* out, const char* out_logits,
                    const char* flags) {
  const int kv32 = strstr(flags, "kv32") != NULL, all = strstr(flags, "all") != NULL;
  struct llama_model* m = load_on(bins, model, strstr(flags, "gpu") != NULL ? 999 : 0);
  const struct llama_vocab* v = llama_model_get_vocab(m);
  const int32_t nv = llama_vocab_n_tokens(v);
  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 1024;
  cp.n_batch = 1024;
  cp.n_threads = cp.n_threads_batch = 2;
  if (kv32) cp.type_k = cp.type_v = GGML_TYPE_F32;
  struct llama_context* ctx = llama_init_from_model(m, cp);
  if (!ctx) die("cannot make a context");
  FILE* fi = fopen(in, "r");
  FILE* fo = fopen(out, "w");
  FILE* fl = fopen(out_logits, "wb");
  if (!fi || !fo || !fl) die("cannot open the input or outputs");
  char line[65536];
  llama_token prompt[4096];
  for (int p = 0; fgets(line, sizeof line, fi); ++p) {
    int32_t n = 0;
    for (char* s = line; *s && *s != '\n';) {
      char* e;
      long id = strtol(s, &e, 10);
      if (e == s) break;
      prompt[n++] = (llama_token)id;
      s = e;
    }
    llama_memory_clear(llama_get_memory(ctx), true);
    fprintf(fo, "prompt %d\n", p);
    struct llama_batch b = llama_batch_get_one(prompt, n);
    for (int k = 0; k < steps; ++k) {
      if (llama_decode(ctx, b) != 0) die("llama_decode failed");
      const float* lg = llama_get_logits_ith(ctx, -1);
      if (k == 0 || all) fwrite(lg, sizeof(float), (size_t)nv, fl);
      int32_t best = 0, second = -1;
      for (int32_t i = 1; i < nv; ++i)
        if (lg[i] > lg[best]) second = best, best = i;
        else if (second < 0 || lg[i] > lg[second]) second = i;
      fprintf(fo, "step %d %.6f %.6f %d\n", best, lg[best], lg[second], second);
      static llama_token next;
      next = best;
      b = llama_batch_get_one(&next, 1);
    }
  }
  fclose(fl);
  fclose(fo);
  fclose(fi);
  llama_free(ctx);
  llama_model_free(m);
  return 0;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

#define WARMUP_S 0.3

static void report(const char* what, int n, double* rate, int reps) {
  qsort(rate, (size_t)reps, sizeof(double), cmp_double);
  printf("%s %d t/s median %.1f min %.1f max %.1f (%d runs)\n", what, n, rate[reps / 2], rate[0], rate[reps - 1], reps);
}

// As llama-bench does: random tokens, a fresh cache for each run, a synchronize before the clock stops.
static int bench(const char* bins, const char* model, int pp, int tg, int reps) {
  struct llama_model* m = load_on(bins, model, 999);
  const int32_t nv = llama_vocab_n_tokens(llama_model_get_vocab(m));
  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = (uint32_t)(pp + tg + 16);
  cp.n_batch = cp.n_ubatch = (uint32_t)(pp > 1 ? pp : 1);
  cp.no_perf = 1;
  struct llama_context* ctx = llama_init_from_model(m, cp);
  if (!ctx) die("cannot make a context");
  llama_token* toks = malloc(sizeof(llama_token) * (size_t)(pp > 1 ? pp : 1));
  srand(1);
  for (int i = 0; i < pp; ++i) toks[i] = rand() % nv;
  double* rate = malloc(sizeof(double) * (size_t)reps);
  // r = -1: warm-up, repeated until WARMUP_S has passed (bench_gguf alike: one run left the GPU's clock ramping)
  double warm_from = now();
  for (int r = -1; r < reps; ++r) {
    llama_memory_clear(llama_get_memory(ctx), true);
    const double t0 = now();
    if (llama_decode(ctx, llama_batch_get_one(toks, pp)) != 0) die("llama_decode (pp) failed");
    llama_synchronize(ctx);
    if (r >= 0) rate[r] = pp / (now() - t0);
    if (r == -1 && now() < warm_from + WARMUP_S) --r;
  }
  report("pp", pp, rate, reps);
  warm_from = now();
  for (int r = -1; r < reps; ++r) {
    llama_memory_clear(llama_get_memory(ctx), true);
    llama_token t = toks[0];
    const double t0 = now();
    for (int k = 0; k < tg; ++k) {
      if (llama_decode(ctx, llama_batch_get_one(&t, 1)) != 0) die("llama_decode (tg) failed");
      llama_synchronize(ctx);
      t = rand() % nv;
    }
    if (r >= 0) rate[r] = tg / (now() - t0);
    if (r == -1 && now() < warm_from + WARMUP_S) --r;
  }
  report("tg", tg, rate, reps);
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i)
    printf("device %zu: %s (%s)\n", i, ggml_backend_dev_name(ggml_backend_dev_get(i)),
           ggml_backend_dev_description(ggml_backend_dev_get(i)));
  llama_free(ctx);
  llama_model_free(m);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 6 && !strcmp(argv[2], "tokenize")) return tokenize(argv[1], argv[3], argv[4], argv[5]);
  if ((argc == 8 || argc == 9) && !strcmp(argv[2], "generate"))
    return generate(argv[1], argv[3], argv[4], atoi(argv[5]), argv[6], argv[7], argc == 9 ? argv[8] : "");
  if (argc == 7 && !strcmp(argv[2], "bench")) return bench(argv[1], argv[3], atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
  fprintf(stderr,
          "usage: %s BINS tokenize MODEL IN.hex OUT | BINS generate MODEL IN.ids STEPS OUT OUT_LOGITS [kv32,all,gpu] | "
          "BINS bench MODEL PP TG REPS\n",
          argv[0]);
  return 2;
}
