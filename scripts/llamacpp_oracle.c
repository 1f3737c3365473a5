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
#include <ggml-backend.h>
#include <llama.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char* what) {
  fprintf(stderr, "llamacpp_oracle: %s\n", what);
  exit(1);
}

static int hexval(int c) { return c <= '9' ? c - '0' : (c | 32) - 'a' + 10; }

static void quiet(enum ggml_log_level level, const char* text, void* user) {
  (void)user;
  if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static struct llama_model* load(const char* bins, const char* path) {
  llama_log_set(quiet, NULL);
  ggml_backend_load_all_from_path(bins);
  llama_backend_init();
  struct llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  struct llama_model* m = llama_model_load_from_file(path, mp);
  if (!m) die("cannot load the model");
  return m;
}

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

static int generate(const char* bins, const char* model, const char* in, int steps, const char* out, const char* out_logits) {
  struct llama_model* m = load(bins, model);
  const struct llama_vocab* v = llama_model_get_vocab(m);
  const int32_t nv = llama_vocab_n_tokens(v);
  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 1024;
  cp.n_batch = 1024;
  cp.n_threads = cp.n_threads_batch = 2;
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
      if (k == 0) fwrite(lg, sizeof(float), (size_t)nv, fl);
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

int main(int argc, char** argv) {
  if (argc == 6 && !strcmp(argv[2], "tokenize")) return tokenize(argv[1], argv[3], argv[4], argv[5]);
  if (argc == 8 && !strcmp(argv[2], "generate")) return generate(argv[1], argv[3], argv[4], atoi(argv[5]), argv[6], argv[7]);
  fprintf(stderr, "usage: %s BINS tokenize MODEL IN.hex OUT | BINS generate MODEL IN.ids STEPS OUT OUT_LOGITS\n", argv[0]);
  return 2;
}
