/*===- fa_runtime.h - C ABI of the fa attention runtime ------------*- C -*-===*\
|*                                                                            *|
|* For FFI (Python ctypes, Rust, ...). Every function returns a status; on   *|
|* failure fa_last_error() describes it (per thread). No function aborts: on *|
|* a machine without a CUDA driver the launches return FA_ERROR_NO_DRIVER.   *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
#ifndef FA_RUNTIME_FA_RUNTIME_H
#define FA_RUNTIME_FA_RUNTIME_H

#include <stdint.h>

/* The library is built with hidden visibility; these are its exports. */
#define FA_API __attribute__((visibility("default")))

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fa_status {
  FA_OK = 0,
  FA_ERROR_INVALID_ARGUMENT = 1,
  FA_ERROR_NO_DRIVER = 2,
  FA_ERROR_CUDA = 3,
  FA_ERROR_COMPILE = 4,
  FA_ERROR_CACHE = 5,
} fa_status;

/* Element types. Functions take them as int (a C caller may pass any
   value; an unknown one is an error, not undefined behaviour). Q, K and V
   are FA_F32, FA_F16, FA_BF16 or FA_E4M3; a captured tensor may be any of
   the first six. */
typedef enum fa_dtype {
  FA_F32 = 0,
  FA_F16 = 1,
  FA_BF16 = 2,
  FA_I32 = 3,
  FA_I64 = 4,
  FA_I8 = 5, /* also a bool tensor's bytes */
  /* FP8 (float8_e4m3fn) Q, K, V: the forward on sm_90a (the wgmma strategy,
     head dims in multiples of 64), with extras->q_descale, k_descale,
     v_descale and O in extras->out_dtype. */
  FA_E4M3 = 6
} fa_dtype;

/* How the kernel computes: auto = simt for f32, mma for f16/bf16. */
typedef enum fa_strategy {
  FA_STRATEGY_AUTO = 0,
  FA_STRATEGY_SIMT = 1, /* f32 arithmetic on CUDA cores */
  FA_STRATEGY_MMA = 2,  /* f16/bf16 tensor cores (mma.sync), sm_80+ */
  FA_STRATEGY_WGMMA = 3 /* f16/bf16 warpgroup MMA (wgmma), sm_90a */
} fa_strategy;

/* The structs a caller fills in or lets the library fill in
   (fa_kernel_config, fa_attention_extras, fa_kernel_info) begin with
   struct_size = sizeof of the struct as the caller's fa_runtime.h defines it,
   so that a library whose structs grew (fields are only ever appended) reads
   and writes only what the caller has: fields past struct_size read as 0.
   A struct_size below the first versioned layout, or above the library's
   own struct (a caller built against a newer header), is an error naming
   both sizes. In C start from FA_KERNEL_CONFIG_INIT,
   FA_ATTENTION_EXTRAS_INIT or FA_KERNEL_INFO_INIT (all other fields 0); in
   C++ value-initialize the struct and set struct_size = sizeof it. */

/* A device tensor [B, H, S, D] (LSE: [B, H, S]); strides in elements. */
typedef struct fa_tensor {
  const void *data;
  int64_t sizes[4];
  int64_t strides[4];
} fa_tensor;

/* Code-generation choices; 0 (or NULL arch) = the default. */
typedef struct fa_kernel_config {
  int64_t struct_size; /* sizeof(fa_kernel_config) */
  int64_t block_m;
  int64_t block_n;
  int64_t num_warps;
  const char *arch;
  int64_t stages;   /* K/V tiles in flight (mma: 1..4) */
  int32_t strategy; /* an fa_strategy */
  int32_t backward; /* 0 or 1: the backward's kernels (fa_prepare_kernel) */
  int32_t deterministic; /* 0 or 1: the backward adds dQ in a fixed order */
  /* fa_prepare_kernel: the sequence length (the longer of query and key)
     the default tiles are chosen for, as a forward on such tensors chooses
     them; 0 = not known. The launches use their tensors' lengths. */
  int64_t sequence_length;
  /* An attention variant, NULL or "" for none: the MLIR text of one
     func.func each (fa::KernelSpec::scoreMod / maskMod: score_mod (score:
     f32, b, h, q_idx, kv_idx, q_len, kv_len: index) -> f32, mask_mod (b, h,
     q_idx, kv_idx, q_len, kv_len: index) -> i1). Part of the cache key. */
  const char *score_mod;
  const char *mask_mod;
  /* 0 or 1: attention sinks (one f32 logit per query head joins each row's
     softmax denominator; fa.attention's `sinks`). fa_prepare_kernel reads
     it; the _ex calls set it from their extras. */
  int32_t sinks;
  /* 0 or 1: a block mask (the forward takes key ranges, the backward query
     ranges: fa_compute_block_mask's tables). fa_prepare_kernel reads it;
     the _ex calls set it from their extras. */
  int32_t block_mask;
  /* 0 or 1: a packed varlen batch (fa_attention_varlen_forward's
     kernels). fa_prepare_kernel reads it; the varlen call sets it. */
  int32_t varlen;
  /* 0 or 1: a KV cache's filled lengths (fa_attention_kvcache_forward's
     kernels). fa_prepare_kernel reads it; the kvcache call sets it. */
  int32_t kv_lens;
} fa_kernel_config;

#define FA_KERNEL_CONFIG_INIT                                                  \
  { .struct_size = (int64_t)sizeof(fa_kernel_config) }

/* A tensor a score_mod or mask_mod reads by index (a captured tensor):
   `rank` (1-4) sizes and strides of tensor, contiguous row-major, of
   element type `dtype` (an fa_dtype). Its type and rank are those of the
   variant text's memref argument. */
typedef struct fa_capture {
  fa_tensor tensor;
  int32_t dtype;
  int32_t rank;
} fa_capture;

/* Tensors beyond Q, K, V, O and LSE (the _ex calls); NULL fields = none. */
typedef struct fa_attention_extras {
  int64_t struct_size; /* sizeof(fa_attention_extras) */
  /* [Hq] f32 sink logits, contiguous: sizes[0] = Hq, strides[0] = 1. */
  const fa_tensor *sinks;
  /* The backward with sinks: their gradient, [Hq] f32 contiguous, set by
     the call (its order of additions, and so its last bits, may differ from
     run to run). */
  const fa_tensor *grad_sinks;
  /* The variant's captured tensors: the score_mod's, then the mask_mod's,
     in the order of their functions' memref arguments (the backward takes
     the forward's; no gradient flows to them). NULL when num_captures = 0. */
  const fa_capture *captures;
  int64_t num_captures;
  /* A block mask (fa_compute_block_mask's tables, i32 contiguous): the
     forward takes key_ranges [B, Hb, ceil(Sq / 16), 4], the backward
     query_ranges [B, Hb, ceil(Sk / 16), 4] (Hb = 1 or Hq), visits only the
     tiles they meet and skips the mask_mod on the tiles they keep whole.
     Needs config->mask_mod. The deterministic backward
     (config->deterministic) takes both: the key ranges order its turns. */
  const fa_tensor *key_ranges;
  const fa_tensor *query_ranges;
  /* The forwards: split-KV, the parts each query tile's keys are split
     into (a kernel per part, then one that merges them by their
     log-sum-exps). 0 = the runtime's choice from the problem and the SMs
     (it splits decode-like problems: few query tiles over many keys), 1 =
     never, 2..128 = that many (not with the wgmma strategy or a block
     mask). The backward ignores it. */
  int64_t kv_splits;
  /* fa_attention_kvcache_forward: a paged cache (flash-attn's block_table):
     i32 [B, max_pages], row-major, device memory; k_cache and v_cache are
     then the pool of pages [num_pages, Hkv, P, D] (sizes; a [num_pages, P,
     Hkv, D] tensor is strides {P * Hkv * D, D, Hkv * D, 1}), and entry b's
     keys are its pages one after another (its first kv_lens[b] used). Any
     P >= 1: where the kernel's block_n divides P a K/V tile is read from
     one page, else row by row (a page_gather kernel); page numbers outside
     the pool are clamped into it. The varlen forwards take it too: a row
     per sequence, k and v the pool (only q, o and lse packed), sequence b's
     keys the first cu_seqlens_k[b + 1] - cu_seqlens_k[b] of its pages
     (max_seqlen_k at most max_pages * P). NULL = not paged. */
  const fa_tensor *block_table;
  /* fa_attention_kvcache_forward: batch entry b reads cache entry
     cache_batch_idx[b] (flash-attn's cache_batch_idx; i32 [B], contiguous,
     device memory; k_cache, v_cache [B_cache, Hkv, S_cache, D]; numbers
     past B_cache are clamped to its last entry). Not with block_table.
     NULL = entry b reads cache entry b. */
  const fa_tensor *cache_batch_idx;
  /* The forwards with dtype FA_E4M3 (and only they): the descale factors
     of Q, K and V (flash-attn's q_descale, k_descale, v_descale), f32
     [B, Hkv], any non-negative strides (an expanded scalar has strides 0),
     device memory; S = scale q_descale k_descale Q K^T, O = v_descale P V.
     All three are required. */
  const fa_tensor *q_descale;
  const fa_tensor *k_descale;
  const fa_tensor *v_descale;
  /* O's element type with dtype FA_E4M3: FA_BF16 or FA_F16; 0 = FA_BF16.
     Must be 0 for the other dtypes (O has the inputs' type). */
  int32_t out_dtype;
} fa_attention_extras;

#define FA_ATTENTION_EXTRAS_INIT                                               \
  { .struct_size = (int64_t)sizeof(fa_attention_extras) }

/* What a kernel is and where it came from. */
typedef struct fa_kernel_info {
  int64_t struct_size; /* sizeof(fa_kernel_info), set by the caller */
  char name[128];
  char key[65];
  int64_t num_threads;
  int64_t shared_memory_bytes;
  int64_t registers;         /* ptxas */
  int64_t spill_store_bytes; /* ptxas */
  int64_t spill_load_bytes;  /* ptxas */
  int32_t source;            /* 0 compiled, 1 disk cache, 2 memory cache */
  double compile_seconds;
  int32_t strategy;          /* the fa_strategy that serves the spec */
  int64_t block_m;           /* the tiles used (defaults resolved) */
  int64_t block_n;
  int64_t num_warps;
  int64_t stages;
  char assembler[64];        /* what made the cubin: "ptxas 13.0.88", "driver 13000" */
  /* compile_seconds split (all 0 for a kernel read from the disk cache): the
     MLIR passes down to LLVM IR, LLVM's NVPTX back end, the assembler. */
  double lower_seconds;
  double codegen_seconds;
  double assemble_seconds;
} fa_kernel_info;

#define FA_KERNEL_INFO_INIT                                                    \
  { .struct_size = (int64_t)sizeof(fa_kernel_info) }

typedef struct fa_runtime fa_runtime;

/* cache_dir: NULL = $FA_CACHE_DIR or ~/.cache/fa. */
FA_API fa_status fa_runtime_create(const char *cache_dir, int device,
                            fa_runtime **runtime);
FA_API void fa_runtime_destroy(fa_runtime *runtime);
/* 1 when a CUDA driver and device are usable. */
FA_API int fa_runtime_has_driver(const fa_runtime *runtime);

/* The name of fa_strategy code `code` ("auto" for FA_STRATEGY_AUTO, then
   the registered strategies' names), or NULL when no strategy has the
   code. The codes run from 0 without gaps. */
FA_API const char *fa_strategy_name(int32_t code);

/* The last error of this thread ("" if none). */
FA_API const char *fa_last_error(void);

/* Finds or compiles the kernel (no GPU needed); info may be NULL. */
FA_API fa_status fa_prepare_kernel(fa_runtime *runtime, int64_t head_dim,
                            int dtype, int causal, double scale,
                            const fa_kernel_config *config,
                            fa_kernel_info *info);

/* O, LSE = attention(Q, K, V) on `stream` (a CUstream, NULL = default).
   causal is 0 or 1; scale 0 means 1/sqrt(D), else it must be positive and
   finite in float32; config may be NULL. */
FA_API fa_status fa_attention_forward(fa_runtime *runtime, const fa_tensor *q,
                               const fa_tensor *k, const fa_tensor *v,
                               const fa_tensor *o, const fa_tensor *lse,
                               int dtype, int causal, double scale,
                               const fa_kernel_config *config, void *stream);

/* dQ, dK, dV = the gradients of attention for dO, from the forward's O and
   LSE (the tensors fa_attention_forward wrote). dO is shaped like O, dQ like
   Q, dK and dV like K; the gradients must not overlap any input. Runs on
   `stream` (NULL = default); the workspace is allocated and freed in
   stream order. config->deterministic = 1 gives bitwise identical dQ run
   to run (default: dQ's shares are added in any order). By default 16-bit
   inputs run on the wgmma strategy at head dims 64 and 128 on sm_90a, on
   the mma strategy at other head dims up to 128 (on sm_80/sm_90 also
   multiples of 16 up to 256); the rest on simt. */
FA_API fa_status fa_attention_backward(
    fa_runtime *runtime, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *o, const fa_tensor *grad_output,
    const fa_tensor *lse, const fa_tensor *grad_query,
    const fa_tensor *grad_key, const fa_tensor *grad_value, int dtype,
    int causal, double scale, const fa_kernel_config *config, void *stream);

/* fa_attention_forward / fa_attention_backward with extra tensors (NULL
   extras = none): with extras->sinks the kernel takes attention sinks, and
   the backward then needs extras->grad_sinks (the deterministic backward
   gives the same bits of it in every run, as of dQ). */
FA_API fa_status fa_attention_forward_ex(
    fa_runtime *runtime, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *o, const fa_tensor *lse,
    const fa_attention_extras *extras, int dtype, int causal, double scale,
    const fa_kernel_config *config, void *stream);
FA_API fa_status fa_attention_backward_ex(
    fa_runtime *runtime, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *o, const fa_tensor *grad_output,
    const fa_tensor *lse, const fa_tensor *grad_query,
    const fa_tensor *grad_key, const fa_tensor *grad_value,
    const fa_attention_extras *extras, int dtype, int causal, double scale,
    const fa_kernel_config *config, void *stream);

/* fa_attention_forward_ex on a packed batch of B sequences of their own
   lengths (flash-attn's varlen convention): q and o hold the query rows of
   every sequence one after another, [1, Hq, total_q, D] (a [total_q, Hq, D]
   tensor is sizes {1, Hq, total_q, D}, strides {0, D, Hq * D, 1}), k and v
   [1, Hkv, total_k, D], lse [1, Hq, total_q]; cu_seqlens_q and
   cu_seqlens_k (i32 [B + 1], contiguous, device memory) hold where each
   sequence starts (non-decreasing from 0 to total_q, total_k). Sequence b
   attends only within its own rows; the causal mask and a variant's
   indices are the sequence's own. max_seqlen_q, max_seqlen_k: the longest
   sequence's rows (at most the totals). The kernel clamps the offsets into
   the tensors, but offsets that break these rules, or a max_seqlen_q below
   some sequence's rows, leave rows of O and LSE unwritten (the call cannot
   read device memory to check them). No block mask with it yet. */
FA_API fa_status fa_attention_varlen_forward(
    fa_runtime *runtime, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *o, const fa_tensor *lse,
    const fa_tensor *cu_seqlens_q, const fa_tensor *cu_seqlens_k,
    int64_t max_seqlen_q, int64_t max_seqlen_k,
    const fa_attention_extras *extras, int dtype, int causal, double scale,
    const fa_kernel_config *config, void *stream);

/* fa_attention_backward_ex of a packed batch fa_attention_varlen_forward
   ran: every tensor packed as that call's (do like o; dq like q; dk, dv
   like k), the same offsets and maxima. Sequence b's dK, dV rows gather
   only its own queries' shares. config->deterministic: each sequence's dQ
   shares in a fixed K/V tile order (turn counters per sequence). Not on
   the wgmma strategy yet (auto picks mma). */
FA_API fa_status fa_attention_varlen_backward(
    fa_runtime *runtime, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *o, const fa_tensor *grad_output,
    const fa_tensor *lse, const fa_tensor *grad_query,
    const fa_tensor *grad_key, const fa_tensor *grad_value,
    const fa_tensor *cu_seqlens_q, const fa_tensor *cu_seqlens_k,
    int64_t max_seqlen_q, int64_t max_seqlen_k,
    const fa_attention_extras *extras, int dtype, int causal, double scale,
    const fa_kernel_config *config, void *stream);

/* fa_attention_forward_ex where batch entry b attends to its first
   kv_lens[b] keys only (a KV cache: flash-attn's cache_seqlens): k and v
   [B, Hkv, S_cache, D] hold the cache, kv_lens (i32 [B], contiguous,
   device memory) how much of it each entry has filled; the causal mask
   aligns the queries to the end of the filled part (the last query is the
   newest token). Lengths past S_cache are clamped to it; keys past a
   length are never read into a score. Not with a block mask. */
FA_API fa_status fa_attention_kvcache_forward(
    fa_runtime *runtime, const fa_tensor *q, const fa_tensor *k_cache,
    const fa_tensor *v_cache, const fa_tensor *o, const fa_tensor *lse,
    const fa_tensor *kv_lens, const fa_attention_extras *extras, int dtype,
    int causal, double scale, const fa_kernel_config *config, void *stream);

/* fa_attention_varlen_forward where sequence b attends to the first
   kv_lens[b] of its keys only (flash-attn's seqused_k; i32 [B], contiguous,
   device memory; clamped to the sequence's keys). Forward only. */
FA_API fa_status fa_attention_varlen_kvcache_forward(
    fa_runtime *runtime, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *o, const fa_tensor *lse,
    const fa_tensor *cu_seqlens_q, const fa_tensor *cu_seqlens_k,
    int64_t max_seqlen_q, int64_t max_seqlen_k, const fa_tensor *kv_lens,
    const fa_attention_extras *extras, int dtype, int causal, double scale,
    const fa_kernel_config *config, void *stream);

/* The block mask of config->mask_mod (with the causal mask where causal is
   1) on the problem of q [B, Hq, Sq, D] and k [B, Hkv, Sk, D] (their sizes
   only: data may be NULL): fills key_ranges [B, Hb, ceil(Sq / 16), 4] and
   query_ranges [B, Hb, ceil(Sk / 16), 4] (i32, contiguous; Hb = 1 when the
   mask is the same for every head, else Hq) with [first, end, whole_first,
   whole_end) entries: the keys some (whole: every) one of each 16 query
   rows keeps, and the rows that keep some (every) one of each 16 keys. extras->captures are the mask_mod's captured tensors (its other
   fields must be NULL). The tables serve every forward and backward of the
   mask on such a problem for as long as the captured tensors' data stays
   the same. */
FA_API fa_status fa_compute_block_mask(
    fa_runtime *runtime, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *key_ranges, const fa_tensor *query_ranges,
    const fa_attention_extras *extras, int causal,
    const fa_kernel_config *config, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* FA_RUNTIME_FA_RUNTIME_H */
