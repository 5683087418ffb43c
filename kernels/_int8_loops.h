/* The int8 codec's loops, included twice by _int8.c: once for the baseline ISA (SSE2 on
 * x86-64, NEON on aarch64) and, on x86-64, once more compiled for AVX2, picked at run time.
 * LOOP(name) names this copy's functions; LOOP_TARGET is its function attribute. Plain C that
 * GCC and clang vectorise at -O3: the inner loops run along a row of the chunk, over the
 * groups (blocks), so each block's reduction stays in order in one SIMD lane.
 */

/* max |x| per column, as the bits of |x|: for non-negative floats the integer order is the
 * float order (subnormals, +Inf above every finite value, a NaN above +Inf), so one signed
 * integer max (SSE2 has the compare) gives the reference's maximum, -0 read as +0, and a
 * NaN whenever the column holds one. */
LOOP_TARGET static void LOOP(column_amax)(const float *restrict x, ptrdiff_t m,
                                          ptrdiff_t groups, int32_t *restrict amax) {
    ptrdiff_t full = m / groups, tail = m % groups;
    memset(amax, 0, (size_t)groups * sizeof *amax);
    for (ptrdiff_t r = 0; r < full; r++) {
        const float *row = x + r * groups;
        for (ptrdiff_t g = 0; g < groups; g++) {
            int32_t a = abs_bits(row[g]);
            amax[g] = a > amax[g] ? a : amax[g];
        }
    }
    const float *row = x + full * groups;
    for (ptrdiff_t g = 0; g < tail; g++) {
        int32_t a = abs_bits(row[g]);
        amax[g] = a > amax[g] ? a : amax[g];
    }
}

LOOP_TARGET static void LOOP(quantise_rows)(const float *restrict x, ptrdiff_t m,
                                            ptrdiff_t groups, const float *restrict inv,
                                            int8_t *restrict q) {
    ptrdiff_t full = m / groups, tail = m % groups;
    for (ptrdiff_t r = 0; r < full; r++) {
        const float *row = x + r * groups;
        int8_t *out = q + r * groups;
        for (ptrdiff_t g = 0; g < groups; g++)
            out[g] = round_i8(row[g] * inv[g]);
    }
    for (ptrdiff_t g = 0; g < tail; g++)
        q[full * groups + g] = round_i8(x[full * groups + g] * inv[g]);
}

LOOP_TARGET static void LOOP(encode_all)(const float *x, ptrdiff_t n, ptrdiff_t block,
                                         ptrdiff_t chunk, float min_amax, int8_t *q,
                                         float *scales, int32_t *amax, float *inv) {
    for (ptrdiff_t lo = 0; lo < n; lo += chunk) {
        ptrdiff_t m = n - lo < chunk ? n - lo : chunk;
        ptrdiff_t groups = chunk_groups(m, block);
        LOOP(column_amax)(x + lo, m, groups, amax);
        int bad = block_scales(amax, groups, min_amax, scales, inv);
        LOOP(quantise_rows)(x + lo, m, groups, inv, q + lo);
        if (bad)
            zero_bad_columns(amax, m, groups, q + lo);
        scales += groups;
    }
}

LOOP_TARGET static void LOOP(decode_all)(const int8_t *restrict q,
                                         const float *restrict scales, ptrdiff_t n,
                                         ptrdiff_t block, ptrdiff_t chunk,
                                         float *restrict out) {
    for (ptrdiff_t lo = 0; lo < n; lo += chunk) {
        ptrdiff_t m = n - lo < chunk ? n - lo : chunk;
        ptrdiff_t groups = chunk_groups(m, block);
        ptrdiff_t full = m / groups, tail = m % groups;
        for (ptrdiff_t r = 0; r < full; r++) {
            const int8_t *row = q + lo + r * groups;
            float *dst = out + lo + r * groups;
            for (ptrdiff_t g = 0; g < groups; g++)
                dst[g] = (float)row[g] * scales[g];
        }
        for (ptrdiff_t g = 0; g < tail; g++)
            out[lo + full * groups + g] = (float)q[lo + full * groups + g] * scales[g];
        scales += groups;
    }
}
