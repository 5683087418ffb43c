/* The fused CPU kernel of the int8 codec: kernels/compress_ref.py's int8_encode and
 * int8_decode, bit for bit, in one read of x per chunk for the block maxima, one pass over the
 * chunk (then in L2) for scale + round + cast, and one pass for decoding. The numpy path
 * (kernels/compress.py) made five passes to encode and two to decode (docs/benchmarks.md).
 *
 * Optional: setuptools builds it at install when a compiler is there (pyproject.toml,
 * ext-modules, optional = true); kernels/int8_native.py loads it, and falls back to the numpy
 * path without it. This file is the CPython side (buffers, checks, the GIL released around
 * the loops); the kernel itself is plain C in _int8_core.h and _int8_loops.h. Portable C, no
 * intrinsics and no -march, so one wheel runs on any x86-64 or aarch64: the loops are compiled
 * for the baseline ISA and, on x86-64, once more for AVX2, chosen at import by what the CPU
 * supports (SSE2 has no 32-bit integer max; docs/benchmarks.md has both copies' figures).
 * Built with -ffp-contract=off: x * inv + 1.5 * 2^23 fused into one FMA (aarch64's default)
 * would round once instead of twice, and q would differ from the reference.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Bumped when the semantics or the signatures change: int8_native.py refuses another one
 * (an editable install whose .so predates the source: re-run `make venv`). */
#define SWARMNODE_INT8_ABI 2

#include "_int8_core.h"

static const struct isa *pick_isa(const char *name) {
    const struct isa *isa = find_isa(name);
    if (!isa)
        PyErr_Format(PyExc_ValueError, "int8: no kernel for ISA %s on this CPU", name);
    return isa;
}

/* How many scales n values have: the sum over chunks of ceil(m / block). */
static Py_ssize_t count_scales(Py_ssize_t n, Py_ssize_t block, Py_ssize_t chunk) {
    Py_ssize_t full = n / chunk, rest = n % chunk;
    return full * chunk_groups(chunk, block) + (rest ? chunk_groups(rest, block) : 0);
}

/* Sizes and alignment of the buffers against n, or a ValueError naming the first wrong one:
 * the Python side checks dtypes and sizes first, this guards the memory all the same. */
static int check_geometry(Py_ssize_t block, Py_ssize_t chunk) {
    if (block < 1 || chunk < 1 || block > chunk || (block & (block - 1)) || chunk % block) {
        PyErr_Format(PyExc_ValueError, "int8: block %zd must be a power of two dividing chunk %zd",
                     block, chunk);
        return -1;
    }
    return 0;
}

static int check_buffer(const Py_buffer *b, const char *name, Py_ssize_t want, size_t align) {
    if (b->len != want) {
        PyErr_Format(PyExc_ValueError, "int8: %s holds %zd bytes, expected %zd", name, b->len,
                     want);
        return -1;
    }
    if ((uintptr_t)b->buf % align) {
        PyErr_Format(PyExc_ValueError, "int8: %s is not %zu-byte aligned", name, align);
        return -1;
    }
    return 0;
}

static PyObject *py_encode(PyObject *self, PyObject *args) {
    Py_buffer x, q, scales;
    Py_ssize_t block, chunk;
    float min_amax;
    const char *isa_name = NULL;
    if (!PyArg_ParseTuple(args, "y*w*w*nnf|z", &x, &q, &scales, &block, &chunk, &min_amax,
                          &isa_name))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = x.len / (Py_ssize_t)sizeof(float);
    const struct isa *isa = pick_isa(isa_name);
    if (!isa || check_geometry(block, chunk) || check_buffer(&x, "x", n * 4, 4) ||
        check_buffer(&q, "q", n, 1) ||
        check_buffer(&scales, "scales", 4 * count_scales(n, block, chunk), 4))
        goto done;
    Py_ssize_t g0 = n ? chunk_groups(n < chunk ? n : chunk, block) : 1;
    int32_t *amax = PyMem_RawMalloc((size_t)g0 * sizeof(int32_t));
    float *inv = PyMem_RawMalloc((size_t)g0 * sizeof(float));
    if (!amax || !inv) {
        PyErr_NoMemory();
    } else {
        Py_BEGIN_ALLOW_THREADS
        isa->encode(x.buf, n, block, chunk, min_amax, q.buf, scales.buf, amax, inv);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    PyMem_RawFree(amax);
    PyMem_RawFree(inv);
done:
    PyBuffer_Release(&x);
    PyBuffer_Release(&q);
    PyBuffer_Release(&scales);
    return result;
}

static PyObject *py_decode(PyObject *self, PyObject *args) {
    Py_buffer q, scales, out;
    Py_ssize_t block, chunk;
    const char *isa_name = NULL;
    if (!PyArg_ParseTuple(args, "y*y*w*nn|z", &q, &scales, &out, &block, &chunk, &isa_name))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = q.len;
    const struct isa *isa = pick_isa(isa_name);
    if (!isa || check_geometry(block, chunk) ||
        check_buffer(&scales, "scales", 4 * count_scales(n, block, chunk), 4) ||
        check_buffer(&out, "out", 4 * n, 4))
        goto done;
    Py_BEGIN_ALLOW_THREADS
    isa->decode(q.buf, scales.buf, n, block, chunk, out.buf);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&q);
    PyBuffer_Release(&scales);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"encode", py_encode, METH_VARARGS,
     "encode(x, q, scales, block, chunk, min_amax, isa=None): int8 codes and block scales of "
     "float32 x (isa: one of ISAS, None for the last)."},
    {"decode", py_decode, METH_VARARGS,
     "decode(q, scales, out, block, chunk, isa=None): float32 values of int8 codes and block "
     "scales."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_int8", "The fused int8 codec kernel (see kernels/int8_native.py).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__int8(void) {
    find_isas();
    PyObject *m = PyModule_Create(&module);
    PyObject *names = PyTuple_New(n_isas);
    for (int i = 0; names && i < n_isas; i++)
        PyTuple_SET_ITEM(names, i, PyUnicode_FromString(isas[i].name));
    if (!m || !names || PyModule_AddIntConstant(m, "ABI", SWARMNODE_INT8_ABI) < 0 ||
        PyModule_AddObjectRef(m, "ISAS", names) < 0) {
        Py_XDECREF(names);
        Py_XDECREF(m);
        return NULL;
    }
    Py_DECREF(names);
    return m;
}
