/* The job replay's solve in one topological sweep (see replay.py: solve).
 *
 * relax(topo, pos, order, first, dd, fixed, measured, in_head, in_edge, src, w, out) -> None
 *
 *   Every point in ``topo`` order (each after all its inputs) set to the latest of: its measured time if ``fixed``,
 *   its chain predecessor + ``dd``, and each incoming cross edge's source + ``w`` (``in_edge[in_head[p]:
 *   in_head[p + 1]]``: the edges into point p). A delay of -inf is an edge that does not hold.
 *
 * sweep(order, first, dd, fixed, measured, src, dst, w, out, topo) -> int
 *
 *   order     int64[n]   points sorted by chain, then time (JobGraph.chain_order); int32 too
 *   first     bool[n]    per position: the first point of its chain
 *   dd        float64[n] per position: the chain edge's delay (ignored for a first point)
 *   fixed     bool[n]    per position: a first point with no incoming edge (kept at its measured time)
 *   measured  float64[n] per point: its measured time
 *   src, dst  int64[e]   the cross edges that hold (int32 too); w float64[e] their delays
 *   out       float64[n] per point, written: the replayed time, the latest of its incoming edges
 *   topo      int64[n]   written: the points in the order they were settled (a topological order); int32 too
 *
 * Every point is settled once, after all its inputs (Kahn's order; a point whose chain successor it frees goes on
 * with that successor at once, so the order runs along chains: the replays that read the points in this order
 * read each chain's delays in sequence). Returns the number of points settled: n when the graph has no cycle;
 * fewer when it has one (the caller then solves by passes). Each point's time is the maximum of its inputs
 * whatever the order they arrive in.
 *
 * In relax, topo, pos, in_head and in_edge are all int64 or all int32 (INDEX_BYTES: the sizes this build takes);
 * in relax_topo, its six index arrays likewise. sweep's and topo_layout's order, src and dst are each int64 or
 * int32 (GRAPH_BYTES): the graph's own arrays, read without a wider copy.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* item k of an index array of 4 (narrow) or 8 bytes */
static inline int64_t ix(const void *a, int narrow, Py_ssize_t k) {
    return narrow ? (int64_t)((const int32_t *)a)[k] : ((const int64_t *)a)[k];
}

/* itemsize 0: 4 or 8 bytes (an index array) */
static int get(PyObject *o, Py_buffer *b, Py_ssize_t itemsize, int writable, const char *what) {
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, b, flags) < 0) return -1;
    if (itemsize == 0 && (b->itemsize == 4 || b->itemsize == 8)) return 0;
    if (b->itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "sweep: %s has items of %zd bytes, expected %zd", what, b->itemsize, itemsize);
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

static PyObject *sweep(PyObject *self, PyObject *args) {
    PyObject *o[10];
    const char *names[10] = {"order", "first", "dd", "fixed", "measured", "src", "dst", "w", "out", "topo"};
    const Py_ssize_t sizes[10] = {0, 1, 8, 1, 8, 0, 0, 8, 8, 0};
    Py_buffer b[10];
    int got = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8],
                          &o[9]))
        return NULL;
    for (; got < 10; got++)
        if (get(o[got], &b[got], sizes[got], got >= 8, names[got]) < 0) goto fail;
    Py_ssize_t n = b[0].len / b[0].itemsize, e = b[5].len / b[5].itemsize;
    if (b[1].len != n || b[2].len / 8 != n || b[3].len != n || b[4].len / 8 != n || b[6].len / b[6].itemsize != e ||
        b[7].len / 8 != e || b[8].len / 8 != n || b[9].len / b[9].itemsize != n) {
        PyErr_SetString(PyExc_ValueError, "sweep: array lengths disagree");
        goto fail;
    }
    const void *order_ = b[0].buf, *src_ = b[5].buf, *dst_ = b[6].buf;
    const int n4 = b[0].itemsize == 4, s4 = b[5].itemsize == 4, d4 = b[6].itemsize == 4;
#define ORDER(i) ix(order_, n4, (i))
#define SRC(k) ix(src_, s4, (k))
#define DST(k) ix(dst_, d4, (k))
    const uint8_t *first = b[1].buf, *fixed = b[3].buf;
    const double *dd = b[2].buf, *measured = b[4].buf, *w = b[7].buf;
    double *v = b[8].buf;
    const int narrow = b[9].itemsize == 4; /* topo int32 */
    int32_t *topo4 = b[9].buf;
    int64_t *topo8 = b[9].buf;
    if (n >= INT32_MAX || e >= INT32_MAX) { /* the counts below are int32: settle nothing, the caller uses passes */
        for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
        return PyLong_FromSsize_t(0);
    }
    for (Py_ssize_t k = 0; k < e; k++)
        if (SRC(k) < 0 || SRC(k) >= n || DST(k) < 0 || DST(k) >= n) {
            PyErr_SetString(PyExc_ValueError, "sweep: an edge names a point out of range");
            goto fail;
        }
    for (Py_ssize_t i = 0; i < n; i++)
        if (ORDER(i) < 0 || ORDER(i) >= n) {
            PyErr_SetString(PyExc_ValueError, "sweep: the chain order names a point out of range");
            goto fail;
        }
    Py_ssize_t done = 0;
    int32_t *pos = malloc(sizeof(int32_t) * (n ? n : 1));
    int32_t *indeg = calloc(n ? n : 1, sizeof(int32_t));
    int32_t *head = calloc(n + 1, sizeof(int32_t));
    int32_t *adj = malloc(sizeof(int32_t) * (e ? e : 1));
    int32_t *queue = NULL; /* the points ready, read front to back (made once the edges are laid out) */
#define QSET(k, p) (queue[k] = (int32_t)(p))
#define QGET(k) ((int64_t)queue[k])
#define SETTLED(k, p) (narrow ? (void)(topo4[k] = (int32_t)(p)) : (void)(topo8[k] = (p)))
    if (!pos || !indeg || !head || !adj) {
        free(pos), free(indeg), free(head), free(adj), free(queue);
        PyErr_NoMemory();
        goto fail;
    }
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t p = ORDER(i);
        pos[p] = i;
        v[p] = fixed[i] ? measured[p] : -INFINITY;
        if (!first[i]) indeg[p]++;
    }
    /* the cross edges by source (counting sort, stable) */
    for (Py_ssize_t k = 0; k < e; k++) head[SRC(k) + 1]++, indeg[DST(k)]++;
    for (Py_ssize_t p = 0; p < n; p++) head[p + 1] += head[p];
    {
        int32_t *fill = malloc(sizeof(int32_t) * (n ? n : 1));
        if (fill) {
            memcpy(fill, head, sizeof(int32_t) * n);
            for (Py_ssize_t k = 0; k < e; k++) adj[fill[SRC(k)]++] = (int32_t)k;
            free(fill);
            queue = malloc(sizeof(int32_t) * (n ? n : 1));
        }
        if (!queue) n = -1; /* out of memory: reported below */
    }
    if (n >= 0) {
        Py_ssize_t qh = 0, qt = 0;
        for (Py_ssize_t i = 0; i < n; i++)
            if (indeg[ORDER(i)] == 0) QSET(qt, ORDER(i)), qt++;
        while (qh < qt) {
            int64_t p = QGET(qh);
            qh++;
            while (p >= 0) { /* p, then its chain successor while settling p frees it */
                double t = v[p];
                SETTLED(done, p);
                done++;
                for (int32_t a = head[p]; a < head[p + 1]; a++) {
                    int64_t k = adj[a], q = DST(k);
                    double x = t + w[k];
                    if (x > v[q]) v[q] = x;
                    if (--indeg[q] == 0) QSET(qt, q), qt++;
                }
                Py_ssize_t i = pos[p];
                p = -1;
                if (i + 1 < n && !first[i + 1]) {
                    int64_t q = ORDER(i + 1);
                    double x = t + dd[i + 1];
                    if (x > v[q]) v[q] = x;
                    if (--indeg[q] == 0) p = q;
                }
            }
        }
    }
    Py_END_ALLOW_THREADS;
#undef QSET
#undef QGET
#undef SETTLED
#undef ORDER
#undef SRC
#undef DST
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

/* relax's loop for index arrays (topo, pos, in_head, in_edge) of type IT */
#define RELAX_LOOP(IT)                                                 \
    do {                                                               \
        const IT *topo = b[0].buf, *pos = b[1].buf, *in_head = b[7].buf, \
                 *in_edge = b[8].buf;                                  \
        for (Py_ssize_t k = 0; k < n; k++) {                           \
            int64_t p = topo[k], i = pos[p];                           \
            double x = fixed[i] ? measured[p] : -INFINITY;             \
            if (!first[i] && i > 0) {                                  \
                double y = v[order[i - 1]] + dd[i];                    \
                if (y > x) x = y;                                      \
            }                                                          \
            for (int64_t a = in_head[p]; a < in_head[p + 1]; a++) {    \
                int64_t q = in_edge[a];                                \
                double y = v[src[q]] + w[q];                           \
                if (y > x) x = y;                                      \
            }                                                          \
            v[p] = x;                                                  \
        }                                                              \
    } while (0)

#define RELAX_CHECK(IT)                                                                                     \
    do {                                                                                                    \
        const IT *topo = b[0].buf, *pos = b[1].buf, *in_head = b[7].buf, *in_edge = b[8].buf;              \
        for (Py_ssize_t k = 0; k < n && ok; k++)                                                            \
            if (topo[k] < 0 || topo[k] >= n || pos[k] < 0 || pos[k] >= n || order[k] < 0 || order[k] >= n || \
                in_head[k] < 0 || in_head[k + 1] < in_head[k] || in_head[k + 1] > e)                        \
                ok = 0;                                                                                     \
        for (Py_ssize_t a = 0; a < e && ok; a++)                                                            \
            if (in_edge[a] < 0 || in_edge[a] >= e || src[in_edge[a]] < 0 || src[in_edge[a]] >= n) ok = 0;   \
    } while (0)

static PyObject *relax(PyObject *self, PyObject *args) {
    PyObject *o[12];
    const char *names[12] = {"topo", "pos", "order", "first", "dd", "fixed", "measured", "in_head", "in_edge",
                             "src", "w", "out"};
    const Py_ssize_t sizes[12] = {0, 0, 8, 1, 8, 1, 8, 0, 0, 8, 8, 8};
    Py_buffer b[12];
    int got = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8],
                          &o[9], &o[10], &o[11]))
        return NULL;
    for (; got < 12; got++)
        if (get(o[got], &b[got], sizes[got], got == 11, names[got]) < 0) goto fail;
    const Py_ssize_t isz = b[0].itemsize;
    if (b[1].itemsize != isz || b[7].itemsize != isz || b[8].itemsize != isz) {
        PyErr_SetString(PyExc_TypeError, "relax: topo, pos, in_head and in_edge differ in item size");
        goto fail;
    }
    Py_ssize_t n = b[0].len / isz, e = b[9].len / 8;
    if (b[1].len / isz != n || b[2].len / 8 != n || b[3].len != n || b[4].len / 8 != n || b[5].len != n ||
        b[6].len / 8 != n || b[7].len / isz != n + 1 || b[8].len / isz != e || b[10].len / 8 != e ||
        b[11].len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "relax: array lengths disagree");
        goto fail;
    }
    const int64_t *order = b[2].buf, *src = b[9].buf;
    const uint8_t *first = b[3].buf, *fixed = b[5].buf;
    const double *dd = b[4].buf, *measured = b[6].buf, *w = b[10].buf;
    double *v = b[11].buf;
    int ok = 1;
    if (isz == 4)
        RELAX_CHECK(int32_t);
    else
        RELAX_CHECK(int64_t);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "relax: an index is out of range");
        goto fail;
    }
    Py_BEGIN_ALLOW_THREADS;
    if (isz == 4)
        RELAX_LOOP(int32_t);
    else
        RELAX_LOOP(int64_t);
    Py_END_ALLOW_THREADS;
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    Py_RETURN_NONE;
fail:
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    return NULL;
}

/* relax_topo's loop for index arrays of type IT: the points are read and written in topological order (vt, by
 * position k in topo), each point's chain predecessor and the sources of its cross edges named by their positions
 * in topo, so the reads follow the order the points settle in; every time is also written by point (out). Each
 * index is checked where it is read (a bad one stops the loop: ok = 0). */
#define RELAX_TOPO_LOOP(IT)                                                                                 \
    do {                                                                                                    \
        const IT *topo = b[0].buf, *prev = b[1].buf, *cpos = b[2].buf, *head = b[5].buf, *esrc = b[6].buf, \
                 *eidx = b[7].buf;                                                                          \
        if (head[0] != 0 || head[n] != e) ok = 0;                                                           \
        for (Py_ssize_t k = 0; k < n && ok; k++) {                                                          \
            int64_t p = topo[k], j = prev[k], c = cpos[k], lo = head[k], hi = head[k + 1];                  \
            if (p < 0 || p >= n || j < -1 || j >= k || c < 0 || c >= n || hi < lo || hi > e) {              \
                ok = 0;                                                                                     \
                break;                                                                                      \
            }                                                                                               \
            double x = fixed[k] ? measured[p] : -INFINITY;                                                  \
            if (j >= 0) {                                                                                   \
                double y = vt[j] + dd[c];                                                                   \
                if (y > x) x = y;                                                                           \
            }                                                                                               \
            for (int64_t a = lo; a < hi; a++) {                                                             \
                int64_t s = esrc[a], q = eidx[a];                                                           \
                if (s < 0 || s >= k || q < 0 || q >= e) {                                                   \
                    ok = 0;                                                                                 \
                    break;                                                                                  \
                }                                                                                           \
                double y = vt[s] + w[q];                                                                    \
                if (y > x) x = y;                                                                           \
            }                                                                                               \
            vt[k] = x;                                                                                      \
            if (by_point) v[p] = x;                                                                         \
        }                                                                                                   \
    } while (0)

/* relax_topo(topo, prev, cpos, fixed, measured, head, esrc, eidx, dd, w, out, by_point=1) -> None
 *
 *   relax with the graph laid out in topological order (k: a position in topo): prev[k] the position of the
 *   point's chain predecessor (-1: none; always before k), cpos[k] its chain position (dd is read there),
 *   fixed[k] whether it keeps its measured time (measured: by point), its cross edges esrc[head[k]:head[k + 1]]
 *   (their sources' positions, each before k) with their delays w[eidx[...]] (the edges into a point in the
 *   order relax reads them). The same times as relax: each point the same maximum, taken in the same order.
 *   ``out``: the times by point (``by_point``), or by position in topo (then nothing else is written). */
static PyObject *relax_topo(PyObject *self, PyObject *args) {
    PyObject *o[11];
    const char *names[11] = {"topo", "prev", "cpos", "fixed", "measured", "head", "esrc", "eidx", "dd", "w", "out"};
    const Py_ssize_t sizes[11] = {0, 0, 0, 1, 8, 0, 0, 0, 8, 8, 8};
    Py_buffer b[11];
    int got = 0;
    int by_point = 1;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOO|p", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8],
                          &o[9], &o[10], &by_point))
        return NULL;
    for (; got < 11; got++)
        if (get(o[got], &b[got], sizes[got], got == 10, names[got]) < 0) goto fail;
    const Py_ssize_t isz = b[0].itemsize;
    if (b[1].itemsize != isz || b[2].itemsize != isz || b[5].itemsize != isz || b[6].itemsize != isz ||
        b[7].itemsize != isz) {
        PyErr_SetString(PyExc_TypeError, "relax_topo: the index arrays differ in item size");
        goto fail;
    }
    Py_ssize_t n = b[0].len / isz, e = b[9].len / 8;
    if (b[1].len / isz != n || b[2].len / isz != n || b[3].len != n || b[4].len / 8 != n ||
        b[5].len / isz != n + 1 || b[6].len / isz != e || b[7].len / isz != e || b[8].len / 8 != n ||
        b[10].len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "relax_topo: array lengths disagree");
        goto fail;
    }
    const uint8_t *fixed = b[3].buf;
    const double *measured = b[4].buf, *dd = b[8].buf, *w = b[9].buf;
    double *v = b[10].buf;
    int ok = 1;
    double *vt = by_point ? malloc(sizeof(double) * (n ? n : 1)) : v; /* (by position: the output itself) */
    if (!vt) {
        PyErr_NoMemory();
        goto fail;
    }
    Py_BEGIN_ALLOW_THREADS;
    if (isz == 4)
        RELAX_TOPO_LOOP(int32_t);
    else
        RELAX_TOPO_LOOP(int64_t);
    Py_END_ALLOW_THREADS;
    if (by_point) free(vt);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "relax_topo: an index is out of range (or not before its point)");
        goto fail;
    }
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    Py_RETURN_NONE;
fail:
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    return NULL;
}

/* topo_layout(topo, order, first, fixed, src, dst, prev, cpos, fixed_k, head, esrc, eidx) -> None
 *
 *   What relax_topo reads of a graph, from a topological order ``topo`` (a permutation of the points) of the
 *   chains ``order``/``first`` (``fixed`` per chain position) and the cross edges ``src``/``dst`` (int64 or int32): written
 *   into prev, cpos, fixed_k (per position k in topo), head (n + 1) and esrc, eidx (per edge; the edges into a
 *   point in ascending edge order). topo and the six outputs' index arrays: all int32 or all int64; fewer than
 *   2**31 - 1 points and edges. */
static PyObject *topo_layout(PyObject *self, PyObject *args) {
    PyObject *o[12];
    const char *names[12] = {"topo", "order", "first", "fixed", "src", "dst",
                             "prev", "cpos", "fixed_k", "head", "esrc", "eidx"};
    const Py_ssize_t sizes[12] = {0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0};
    Py_buffer b[12];
    int got = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8],
                          &o[9], &o[10], &o[11]))
        return NULL;
    for (; got < 12; got++)
        if (get(o[got], &b[got], sizes[got], got >= 6, names[got]) < 0) goto fail;
    const Py_ssize_t isz = b[0].itemsize;
    if (b[6].itemsize != isz || b[7].itemsize != isz || b[9].itemsize != isz || b[10].itemsize != isz ||
        b[11].itemsize != isz) {
        PyErr_SetString(PyExc_TypeError, "topo_layout: the index arrays differ in item size");
        goto fail;
    }
    Py_ssize_t n = b[0].len / isz, e = b[4].len / b[4].itemsize;
    if (b[1].len / b[1].itemsize != n || b[2].len != n || b[3].len != n || b[5].len / b[5].itemsize != e ||
        b[6].len / isz != n ||
        b[7].len / isz != n || b[8].len != n || b[9].len / isz != n + 1 || b[10].len / isz != e ||
        b[11].len / isz != e) {
        PyErr_SetString(PyExc_ValueError, "topo_layout: array lengths disagree");
        goto fail;
    }
    const void *order_ = b[1].buf, *src_ = b[4].buf, *dst_ = b[5].buf;
    const int n4 = b[1].itemsize == 4, s4 = b[4].itemsize == 4, d4 = b[5].itemsize == 4;
#define ORDER(i) ix(order_, n4, (i))
#define SRC(k) ix(src_, s4, (k))
#define DST(k) ix(dst_, d4, (k))
    const uint8_t *first = b[2].buf, *fixed = b[3].buf;
    uint8_t *fixed_k = b[8].buf;
    if (n >= INT32_MAX || e >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "topo_layout: too many points or edges");
        goto fail;
    }
    int32_t *at = malloc(sizeof(int32_t) * (n ? n : 1)), *pos = malloc(sizeof(int32_t) * (n + 1));
    int32_t *fill = pos; /* (the chain positions read first, then the edges' slots counted in the same array) */
    if (!at || !pos) {
        free(at), free(pos);
        PyErr_NoMemory();
        goto fail;
    }
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t i = 0; i < n; i++) at[i] = -1, pos[i] = -1;
    for (Py_ssize_t i = 0; i < n && ok; i++) {
        int64_t p = ORDER(i);
        if (p < 0 || p >= n || pos[p] >= 0) ok = 0; /* not a permutation */
        else pos[p] = (int32_t)i;
    }
    for (Py_ssize_t k = 0; k < n && ok; k++) {
        int64_t p = isz == 4 ? (int64_t)((const int32_t *)b[0].buf)[k] : ((const int64_t *)b[0].buf)[k];
        if (p < 0 || p >= n || at[p] >= 0) ok = 0;
        else at[p] = (int32_t)k;
    }
    for (Py_ssize_t q = 0; q < e && ok; q++)
        if (SRC(q) < 0 || SRC(q) >= n || DST(q) < 0 || DST(q) >= n) ok = 0;
    if (ok) {
#define LAYOUT(IT)                                                                              \
    do {                                                                                        \
        const IT *topo = b[0].buf;                                                              \
        IT *prev = b[6].buf, *cpos = b[7].buf, *head = b[9].buf, *esrc = b[10].buf, *eidx = b[11].buf; \
        for (Py_ssize_t k = 0; k < n; k++) {                                                    \
            int64_t i = pos[topo[k]];                                                           \
            cpos[k] = (IT)i;                                                                    \
            prev[k] = (IT)(first[i] || i == 0 ? -1 : at[ORDER(i - 1)]);                         \
            fixed_k[k] = fixed[i];                                                              \
        }                                                                                       \
        for (Py_ssize_t k = 0; k <= n; k++) fill[k] = 0;                                        \
        for (Py_ssize_t q = 0; q < e; q++) fill[at[DST(q)] + 1]++;                              \
        for (Py_ssize_t k = 0; k < n; k++) fill[k + 1] += fill[k];                              \
        for (Py_ssize_t k = 0; k <= n; k++) head[k] = (IT)fill[k];                              \
        for (Py_ssize_t q = 0; q < e; q++) {                                                    \
            int32_t a = fill[at[DST(q)]]++;                                                     \
            eidx[a] = (IT)q;                                                                    \
            esrc[a] = (IT)at[SRC(q)];                                                           \
        }                                                                                       \
    } while (0)
        if (isz == 4)
            LAYOUT(int32_t);
        else
            LAYOUT(int64_t);
#undef LAYOUT
    }
#undef ORDER
#undef SRC
#undef DST
    Py_END_ALLOW_THREADS;
    free(at), free(pos);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "topo_layout: an index is out of range or repeated");
        goto fail;
    }
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    Py_RETURN_NONE;
fail:
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    return NULL;
}

static PyMethodDef methods[] = {
    {"topo_layout", topo_layout, METH_VARARGS, "What relax_topo reads of a graph, from a topological order."},
    {"relax", relax, METH_VARARGS, "Every point, in a topological order, set to the latest of its inputs."},
    {"relax_topo", relax_topo, METH_VARARGS, "relax, with the graph laid out in the topological order."},
    {"sweep", sweep, METH_VARARGS, "Replayed time of every point of the job graph in one topological sweep."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_replay", NULL, -1, methods};

PyMODINIT_FUNC PyInit__replay(void) {
    PyObject *m = PyModule_Create(&module);
    /* the item sizes the index arrays may have (a build before int32 indices took 8 only) */
    if (m && PyModule_AddObject(m, "INDEX_BYTES", Py_BuildValue("(ii)", 4, 8)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    /* the item sizes sweep's and topo_layout's order, src and dst may have (a build before took 8 only) */
    if (m && PyModule_AddObject(m, "GRAPH_BYTES", Py_BuildValue("(ii)", 4, 8)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
