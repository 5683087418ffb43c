/* The int8 codec kernel's C, without Python: the helpers, the loops (_int8_loops.h) for each
 * ISA, and the choice among them. _int8.c wraps it as a CPython extension;
 * scripts/check/cross_int8.py builds it alone into a test program for another architecture (aarch64
 * under qemu). Sizes are ptrdiff_t (what Py_ssize_t is).
 *
 * Layout (kernels/codec_base.py, int8_layout): a chunk of m values is a (rows, groups)
 * matrix, row-major, zero-padded; value o belongs to block (column) o % groups. The zero
 * padding changes no block's maximum, so it is never materialised: only the last row is short.
 */
#ifndef SWARMNODE_INT8_CORE_H
#define SWARMNODE_INT8_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* 1.5 * 2^23: y + MAGIC rounds y (|y| <= 2^22) to an integer, half to even, in the default
 * rounding mode, and leaves it in the low mantissa bits: rint without libm or SSE4.1. */
#define MAGIC 12582912.0f
#define MAGIC_BITS 0x4B400000
#define INF_BITS 0x7F800000

static inline int32_t abs_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (int32_t)(u & 0x7FFFFFFFu);
}

static inline float from_bits(int32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* The reference's rint(y).astype(int8) for finite |y| <= 127.5. */
static inline int8_t round_i8(float y) {
    float t = y + MAGIC;
    int32_t b;
    memcpy(&b, &t, sizeof b);
    return (int8_t)(b - MAGIC_BITS);
}

static ptrdiff_t chunk_groups(ptrdiff_t m, ptrdiff_t block) {
    return (m + block - 1) / block;
}

/* scale = max|x| / 127; inv = 127 / max|x|, or 0 where max|x| < min_amax (127 / max|x| is
 * Inf) or is NaN: the reference's divide(..., where=amax >= I8_MIN_AMAX). Returns whether a
 * column holds an Inf or a NaN (its q need the fix-up below). One value per block: scalar. */
static int block_scales(const int32_t *amax, ptrdiff_t groups, float min_amax, float *scales,
                        float *inv) {
    int bad = 0;
    for (ptrdiff_t g = 0; g < groups; g++) {
        float a = from_bits(amax[g]);
        scales[g] = a / 127.0f;
        inv[g] = a >= min_amax ? 127.0f / a : 0.0f;
        bad |= amax[g] >= INF_BITS;
    }
    return bad;
}

/* A column with an Inf or a NaN has inv = 0, so its q are rint(x * 0) = 0, and rint(NaN)
 * (from Inf * 0 or NaN * 0) casts to 0 in the reference (numpy on x86-64; aarch64 converts
 * NaN to 0 too); round_i8 of a NaN is its payload's low bits, so such columns are written
 * again. Rare: a diverged model. */
static void zero_bad_columns(const int32_t *amax, ptrdiff_t m, ptrdiff_t groups, int8_t *q) {
    for (ptrdiff_t g = 0; g < groups; g++)
        if (amax[g] >= INF_BITS)
            for (ptrdiff_t o = g; o < m; o += groups)
                q[o] = 0;
}

#define LOOP(name) name##_baseline
#define LOOP_TARGET
#include "_int8_loops.h"
#undef LOOP
#undef LOOP_TARGET

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_AVX2_COPY 1
#define LOOP(name) name##_avx2
#define LOOP_TARGET __attribute__((target("avx2")))
#include "_int8_loops.h"
#undef LOOP
#undef LOOP_TARGET
#endif

typedef void (*encode_fn)(const float *, ptrdiff_t, ptrdiff_t, ptrdiff_t, float, int8_t *,
                          float *, int32_t *, float *);
typedef void (*decode_fn)(const int8_t *, const float *, ptrdiff_t, ptrdiff_t, ptrdiff_t,
                          float *);

/* The copies this CPU runs, baseline first; the last one is the default. */
static struct isa {
    const char *name;
    encode_fn encode;
    decode_fn decode;
} isas[2] = {{"baseline", encode_all_baseline, decode_all_baseline}};
static int n_isas = 1;

static void find_isas(void) {
    if (n_isas > 1)
        return; /* a second init (a subinterpreter) */
#ifdef HAVE_AVX2_COPY
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) /* libgcc also checks that the OS saves the YMM state */
        isas[n_isas++] = (struct isa){"avx2", encode_all_avx2, decode_all_avx2};
#endif
}

/* The named copy, the last (best) one for NULL, or NULL for a name this CPU does not run. */
static const struct isa *find_isa(const char *name) {
    if (!name)
        return &isas[n_isas - 1];
    for (int i = 0; i < n_isas; i++)
        if (strcmp(isas[i].name, name) == 0)
            return &isas[i];
    return NULL;
}

#endif
