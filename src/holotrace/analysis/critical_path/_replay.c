/* The job replay's solve in one topological sweep (see replay.py: solve).
 *
 * sweep(order, first, dd, fixed, measured, src, dst, w, out) -> int
 *
 *   order     int64[n]   points sorted by chain, then time (JobGraph.chain_order)
 *   first     bool[n]    per position: the first point of its chain
 *   dd        float64[n] per position: the chain edge's delay (ignored for a first point)
 *   fixed     bool[n]    per position: a first point with no incoming edge (kept at its measured time)
 *   measured  float64[n] per point: its measured time
 *   src, dst  int64[e]   the cross edges that hold; w float64[e] their delays
 *   out       float64[n] per point, written: the replayed time, the latest of its incoming edges
 *
 * Every point is settled once, after all its inputs (Kahn's order). Returns the number of points settled: n when
 * the graph has no cycle; fewer when it has one (the caller then solves by passes).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int get(PyObject *o, Py_buffer *b, Py_ssize_t itemsize, int writable, const char *what) {
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, b, flags) < 0) return -1;
    if (b->itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "sweep: %s has items of %zd bytes, expected %zd", what, b->itemsize, itemsize);
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

static PyObject *sweep(PyObject *self, PyObject *args) {
    PyObject *o[9];
    const char *names[9] = {"order", "first", "dd", "fixed", "measured", "src", "dst", "w", "out"};
    const Py_ssize_t sizes[9] = {8, 1, 8, 1, 8, 8, 8, 8, 8};
    Py_buffer b[9];
    int got = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8]))
        return NULL;
    for (; got < 9; got++)
        if (get(o[got], &b[got], sizes[got], got == 8, names[got]) < 0) goto fail;
    Py_ssize_t n = b[0].len / 8, e = b[5].len / 8;
    if (b[1].len != n || b[2].len / 8 != n || b[3].len != n || b[4].len / 8 != n || b[6].len / 8 != e ||
        b[7].len / 8 != e || b[8].len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "sweep: array lengths disagree");
        goto fail;
    }
    const int64_t *order = b[0].buf, *src = b[5].buf, *dst = b[6].buf;
    const uint8_t *first = b[1].buf, *fixed = b[3].buf;
    const double *dd = b[2].buf, *measured = b[4].buf, *w = b[7].buf;
    double *v = b[8].buf;
    for (Py_ssize_t k = 0; k < e; k++)
        if (src[k] < 0 || src[k] >= n || dst[k] < 0 || dst[k] >= n) {
            PyErr_SetString(PyExc_ValueError, "sweep: an edge names a point out of range");
            goto fail;
        }
    for (Py_ssize_t i = 0; i < n; i++)
        if (order[i] < 0 || order[i] >= n) {
            PyErr_SetString(PyExc_ValueError, "sweep: the chain order names a point out of range");
            goto fail;
        }
    Py_ssize_t done = 0;
    int64_t *pos = malloc(sizeof(int64_t) * (n ? n : 1));
    int32_t *indeg = calloc(n ? n : 1, sizeof(int32_t));
    int64_t *head = calloc(n + 1, sizeof(int64_t));
    int64_t *adj = malloc(sizeof(int64_t) * (e ? e : 1));
    int64_t *queue = malloc(sizeof(int64_t) * (n ? n : 1));
    if (!pos || !indeg || !head || !adj || !queue) {
        free(pos), free(indeg), free(head), free(adj), free(queue);
        PyErr_NoMemory();
        goto fail;
    }
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t p = order[i];
        pos[p] = i;
        v[p] = fixed[i] ? measured[p] : -INFINITY;
        if (!first[i]) indeg[p]++;
    }
    /* the cross edges by source (counting sort, stable) */
    for (Py_ssize_t k = 0; k < e; k++) head[src[k] + 1]++, indeg[dst[k]]++;
    for (Py_ssize_t p = 0; p < n; p++) head[p + 1] += head[p];
    {
        int64_t *fill = malloc(sizeof(int64_t) * (n ? n : 1));
        if (fill) {
            memcpy(fill, head, sizeof(int64_t) * n);
            for (Py_ssize_t k = 0; k < e; k++) adj[fill[src[k]]++] = k;
            free(fill);
        } else {
            n = -1; /* out of memory: reported below */
        }
    }
    if (n >= 0) {
        Py_ssize_t qh = 0, qt = 0;
        for (Py_ssize_t i = 0; i < n; i++)
            if (indeg[order[i]] == 0) queue[qt++] = order[i];
        while (qh < qt) {
            int64_t p = queue[qh++];
            double t = v[p];
            done++;
            Py_ssize_t i = pos[p];
            if (i + 1 < n && !first[i + 1]) {
                int64_t q = order[i + 1];
                double x = t + dd[i + 1];
                if (x > v[q]) v[q] = x;
                if (--indeg[q] == 0) queue[qt++] = q;
            }
            for (int64_t a = head[p]; a < head[p + 1]; a++) {
                int64_t k = adj[a], q = dst[k];
                double x = t + w[k];
                if (x > v[q]) v[q] = x;
                if (--indeg[q] == 0) queue[qt++] = q;
            }
        }
    }
    Py_END_ALLOW_THREADS;
    free(pos), free(indeg), free(head), free(adj), free(queue);
    if (n < 0) {
        PyErr_NoMemory();
        goto fail;
    }
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    return PyLong_FromSsize_t(done);
fail:
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    return NULL;
}

static PyMethodDef methods[] = {
    {"sweep", sweep, METH_VARARGS, "Replayed time of every point of the job graph in one topological sweep."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_replay", NULL, -1, methods};

PyMODINIT_FUNC PyInit__replay(void) { return PyModule_Create(&module); }
