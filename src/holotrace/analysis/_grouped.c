/* Group reductions of float64 values in row order, exactly as pandas' groupby computes them.
 *
 * kahan:   per group, the compensated sum of the non-NaN values in row order (pandas' group_sum and the sum of
 *          group_mean: y = v - c; t = s + y; c = t - s - y; c reset to 0 when NaN (an infinite value); s = t)
 *          and the count of those values.
 * extremes: per group, the least and the largest non-NaN value (strict comparisons: the first of equal values, as
 *          pandas' group_min/group_max), NaN for a group without one.
 * welford: per group, the running mean and sum of squared deviations of the non-NaN values in row order
 *          (pandas' group_var: mean += (v - old) / n; m2 += (v - mean) * (v - old)) and their count.
 * Rows whose code is negative belong to no group. Built with -ffp-contract=off: no fused multiply-add, so the
 * bits do not depend on the CPU.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static int get(PyObject *o, Py_buffer *b, Py_ssize_t itemsize, int writable, const char *fn, const char *what) {
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, b, flags) < 0) return -1;
    if (b->itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "%s: %s has items of %zd bytes, expected %zd", fn, what, b->itemsize, itemsize);
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

/* codes (int64), values (float64), then n_out writable outputs: float64 per group, ..., int64 counts per group */
static int take(PyObject *args, const char *fn, Py_buffer *b, int n_float_out) {
    PyObject *o[5];
    const char *names[5] = {"codes", "values", "out", "out", "counts"};
    int n = 3 + n_float_out;
    if (!PyArg_UnpackTuple(args, fn, n, n, &o[0], &o[1], &o[2], &o[3], &o[4])) return -1;
    for (int i = 0; i < n; i++) {
        Py_ssize_t size = (i == 1 || (i >= 2 && i < 2 + n_float_out)) ? (Py_ssize_t)sizeof(double) : 8;
        const char *what = i == n - 1 ? names[4] : names[i];
        if (get(o[i], &b[i], size, i >= 2, fn, what) < 0) {
            while (i--) PyBuffer_Release(&b[i]);
            return -1;
        }
    }
    Py_ssize_t rows = b[0].len / 8, groups = b[n - 1].len / 8;
    int bad = b[1].len / (Py_ssize_t)sizeof(double) != rows;
    for (int i = 2; i < n - 1; i++) bad |= b[i].len / (Py_ssize_t)sizeof(double) != groups;
    if (bad) {
        PyErr_Format(PyExc_ValueError, "%s: codes and values differ in length, or the outputs in their groups", fn);
        for (int i = 0; i < n; i++) PyBuffer_Release(&b[i]);
        return -1;
    }
    return 0;
}

static PyObject *kahan(PyObject *self, PyObject *args) {
    Py_buffer b[4];
    if (take(args, "kahan", b, 1) < 0) return NULL;
    const int64_t *code = b[0].buf;
    const double *val = b[1].buf;
    double *sum = b[2].buf;
    int64_t *nobs = b[3].buf;
    Py_ssize_t rows = b[0].len / 8, groups = b[3].len / 8;
    double *comp = PyMem_Calloc(groups ? groups : 1, sizeof(double));
    int bad = 0;
    if (!comp) {
        for (int i = 0; i < 4; i++) PyBuffer_Release(&b[i]);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t g = 0; g < groups; g++) sum[g] = 0.0, nobs[g] = 0;
    for (Py_ssize_t i = 0; i < rows; i++) {
        int64_t g = code[i];
        double v = val[i];
        if (g < 0) continue;
        if (g >= groups) {
            bad = 1;
            break;
        }
        if (v != v) continue;
        nobs[g]++;
        double y = v - comp[g];
        double t = sum[g] + y;
        comp[g] = t - sum[g] - y;
        if (comp[g] != comp[g]) comp[g] = 0.0;
        sum[g] = t;
    }
    Py_END_ALLOW_THREADS;
    PyMem_Free(comp);
    for (int i = 0; i < 4; i++) PyBuffer_Release(&b[i]);
    if (bad) return PyErr_Format(PyExc_ValueError, "kahan: a code is not below the number of groups");
    Py_RETURN_NONE;
}

static PyObject *welford(PyObject *self, PyObject *args) {
    Py_buffer b[5];
    if (take(args, "welford", b, 2) < 0) return NULL;
    const int64_t *code = b[0].buf;
    const double *val = b[1].buf;
    double *mean = b[2].buf, *m2 = b[3].buf;
    int64_t *nobs = b[4].buf;
    Py_ssize_t rows = b[0].len / 8, groups = b[4].len / 8;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t g = 0; g < groups; g++) mean[g] = 0.0, m2[g] = 0.0, nobs[g] = 0;
    for (Py_ssize_t i = 0; i < rows; i++) {
        int64_t g = code[i];
        double v = val[i];
        if (g < 0) continue;
        if (g >= groups) {
            bad = 1;
            break;
        }
        if (v != v) continue;
        nobs[g]++;
        double old = mean[g];
        mean[g] += (v - old) / (double)nobs[g];
        m2[g] += (v - mean[g]) * (v - old);
    }
    Py_END_ALLOW_THREADS;
    for (int i = 0; i < 5; i++) PyBuffer_Release(&b[i]);
    if (bad) return PyErr_Format(PyExc_ValueError, "welford: a code is not below the number of groups");
    Py_RETURN_NONE;
}

static PyObject *extremes(PyObject *self, PyObject *args) {
    Py_buffer b[5];
    if (take(args, "extremes", b, 2) < 0) return NULL;
    const int64_t *code = b[0].buf;
    const double *val = b[1].buf;
    double *low = b[2].buf, *high = b[3].buf;
    int64_t *nobs = b[4].buf;
    Py_ssize_t rows = b[0].len / 8, groups = b[4].len / 8;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t g = 0; g < groups; g++) low[g] = high[g] = Py_NAN, nobs[g] = 0;
    for (Py_ssize_t i = 0; i < rows; i++) {
        int64_t g = code[i];
        double v = val[i];
        if (g < 0) continue;
        if (g >= groups) {
            bad = 1;
            break;
        }
        if (v != v) continue;
        if (nobs[g]++ == 0) {
            low[g] = high[g] = v;
            continue;
        }
        if (v < low[g]) low[g] = v; /* strict: an equal later value (0.0 after -0.0) keeps the first */
        if (v > high[g]) high[g] = v;
    }
    Py_END_ALLOW_THREADS;
    for (int i = 0; i < 5; i++) PyBuffer_Release(&b[i]);
    if (bad) return PyErr_Format(PyExc_ValueError, "extremes: a code is not below the number of groups");
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"extremes", extremes, METH_VARARGS,
     "extremes(codes, values, mins, maxs, counts): the least and largest non-NaN value per group (the first of ties)."},
    {"kahan", kahan, METH_VARARGS, "kahan(codes, values, sums, counts): compensated sums per group, in row order."},
    {"welford", welford, METH_VARARGS,
     "welford(codes, values, means, m2, counts): running means and squared deviations per group, in row order."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_grouped", NULL, -1, methods};

PyMODINIT_FUNC PyInit__grouped(void) { return PyModule_Create(&module); }
