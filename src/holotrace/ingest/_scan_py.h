/* Python interface of the scanner; included by _scan_event.h. */

/* A column buffer handed to Python without a copy: it owns the malloc'd memory of a Buf. */
typedef struct {
    PyObject_HEAD
    char *p;
    Py_ssize_t n;
} CBuf;

static int CBuf_getbuffer(CBuf *self, Py_buffer *view, int flags) {
    return PyBuffer_FillInfo(view, (PyObject *)self, self->p ? self->p : (char *)"", self->n, 0, flags);
}

static void CBuf_dealloc(CBuf *self) {
    free(self->p);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t CBuf_len(CBuf *self) { return self->n; }

static PyBufferProcs CBuf_as_buffer = {.bf_getbuffer = (getbufferproc)CBuf_getbuffer};
static PySequenceMethods CBuf_seq = {.sq_length = (lenfunc)CBuf_len};

static PyTypeObject CBufType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "holotrace.ingest._scan.Column",
    .tp_basicsize = sizeof(CBuf),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)CBuf_dealloc,
    .tp_as_buffer = &CBuf_as_buffer,
    .tp_as_sequence = &CBuf_seq,
    .tp_doc = "Bytes of one column (buffer protocol, writable)",
};

/* move a Buf into a Python object (the Buf is left empty) */
static PyObject *ba(Buf *b) {
    CBuf *o = PyObject_New(CBuf, &CBufType);
    if (!o) return NULL;
    if (b->n < b->cap && b->n > 0) { /* give back what the doubling left unused */
        char *q = (char *)realloc(b->p, b->n);
        if (q) b->p = q;
    }
    o->p = b->p;
    o->n = (Py_ssize_t)b->n;
    b->p = NULL;
    b->n = b->cap = 0;
    return (PyObject *)o;
}

static int put(PyObject *d, const char *k, PyObject *v) {
    if (!v) return -1;
    int r = PyDict_SetItemString(d, k, v);
    Py_DECREF(v);
    return r;
}

static void scan_free(Scan *S) {
    Buf *bufs[] = {&S->scratch, &S->ph, &S->cat, &S->name, &S->bp, &S->sc, &S->pid, &S->tid, &S->ts, &S->dur,
                   &S->id, &S->flags, &S->spans, &S->c_row, &S->c_key, &S->c_val, &S->bad, &S->badv};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) buf_free(bufs[i]);
    for (int j = 0; j < MAXSPEC; j++) buf_free(&S->col[j].b);
    strtab_free(&S->st);
}

static PyObject *result(Scan *S) {
    PyObject *d = PyDict_New(), *args = NULL, *ex = NULL;
    if (!d) return NULL;
    if (put(d, "n", PyLong_FromLongLong(S->n)) || put(d, "status", PyLong_FromLong(S->status)) ||
        put(d, "end", PyLong_FromLongLong(S->err_off)) || put(d, "ts_float", PyBool_FromLong(S->ts_float)) ||
        put(d, "nonstd", PyBool_FromLong(S->nonstd)) || put(d, "ph", ba(&S->ph)) || put(d, "cat", ba(&S->cat)) ||
        put(d, "name", ba(&S->name)) || put(d, "bp", ba(&S->bp)) || put(d, "s", ba(&S->sc)) ||
        put(d, "pid", ba(&S->pid)) || put(d, "tid", ba(&S->tid)) || put(d, "ts", ba(&S->ts)) ||
        put(d, "dur", ba(&S->dur)) || put(d, "id", ba(&S->id)) || put(d, "flags", ba(&S->flags)) ||
        put(d, "c_row", ba(&S->c_row)) || put(d, "c_key", ba(&S->c_key)) || put(d, "c_val", ba(&S->c_val)) ||
        put(d, "bad", ba(&S->bad)) || put(d, "badv", ba(&S->badv)) || put(d, "sblob", PyBytes_FromStringAndSize(S->st.arena.p ? S->st.arena.p : "", (Py_ssize_t)S->st.arena.n)) ||
        put(d, "soff", ba(&S->st.offs)))
        goto fail;
    if (S->want_spans && put(d, "spans", ba(&S->spans))) goto fail;
    if (!(args = PyDict_New()) || !(ex = PyDict_New())) goto fail;
    for (int j = 0; j < n_spec; j++) {
        if (S->col[j].made) {
            PyObject *k = PyLong_FromLong(j), *v = ba(&S->col[j].b);
            int bad = !k || !v || PyDict_SetItem(args, k, v);
            Py_XDECREF(k);
            Py_XDECREF(v);
            if (bad) goto fail;
        }
        if (S->bad_ex[j][1] >= 0) {
            PyObject *k = PyLong_FromLong(j), *v = Py_BuildValue("(LL)", (long long)S->bad_ex[j][0], (long long)S->bad_ex[j][1]);
            int bad = !k || !v || PyDict_SetItem(ex, k, v);
            Py_XDECREF(k);
            Py_XDECREF(v);
            if (bad) goto fail;
        }
    }
    if (PyDict_SetItemString(d, "args", args) || PyDict_SetItemString(d, "bad_ex", ex)) goto fail;
    Py_DECREF(args);
    Py_DECREF(ex);
    return d;
fail:
    Py_XDECREF(args);
    Py_XDECREF(ex);
    Py_DECREF(d);
    return NULL;
}

static int scan_configured = 0; /* configure() has succeeded: the arg key table is set */

static PyObject *py_scan(PyObject *self, PyObject *a) {
    Py_buffer view;
    int want_spans = 0;
    if (!scan_configured) {
        PyErr_SetString(PyExc_RuntimeError, "scan() before configure(): call configure(keys, kinds, defaults) first");
        return NULL;
    }
    if (!PyArg_ParseTuple(a, "y*|p", &view, &want_spans)) return NULL;
    Scan *S = (Scan *)calloc(1, sizeof(Scan));
    if (!S || strtab_init(&S->st)) {
        free(S);
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    S->s = S->p = (const uchar *)view.buf;
    S->e = S->s + view.len;
    S->want_spans = want_spans;
    S->empty_id = S->true_id = S->false_id = -2;
    for (int j = 0; j < MAXSPEC; j++) S->bad_ex[j][1] = -1;
    Py_BEGIN_ALLOW_THREADS
    /* the K_STR literals of booleans, interned only if they occur */
    scan_run(S);
    Py_END_ALLOW_THREADS
    PyObject *out = NULL;
    if (S->status == -1) PyErr_NoMemory();
    else out = result(S);
    scan_free(S);
    free(S);
    PyBuffer_Release(&view);
    return out;
}

static PyObject *py_configure(PyObject *self, PyObject *a) {
    PyObject *keys, *kinds, *defaults;
    if (!PyArg_ParseTuple(a, "OOO", &keys, &kinds, &defaults)) return NULL;
    Py_ssize_t n = PySequence_Size(keys);
    if (n < 0 || n > MAXSPEC || PySequence_Size(kinds) != n || PySequence_Size(defaults) != n) {
        PyErr_SetString(PyExc_ValueError, "bad arg specification");
        return NULL;
    }
    scan_configured = 0;
    for (int j = 0; j < NSLOT; j++) spec_slot[j] = -1;
    for (int j = 0; j < n_spec; j++) free(spec_key[j]);
    n_spec = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *k = PySequence_GetItem(keys, j), *t = PySequence_GetItem(kinds, j), *d = PySequence_GetItem(defaults, j);
        char *kb;
        Py_ssize_t kl;
        int ok = k && t && d && PyBytes_AsStringAndSize(k, &kb, &kl) == 0;
        if (ok) {
            spec_key[j] = (char *)malloc((size_t)kl + 1);
            memcpy(spec_key[j], kb, (size_t)kl);
            spec_len[j] = (size_t)kl;
            spec_kind[j] = (int)PyLong_AsLong(t);
            if (spec_kind[j] == K_FLOAT) {
                double f = PyFloat_AsDouble(d);
                memcpy(&spec_default[j], &f, 8);
            } else spec_default[j] = PyLong_AsLongLong(d);
            size_t s = hash_bytes((const uchar *)kb, (size_t)kl) & (NSLOT - 1);
            while (spec_slot[s] >= 0) s = (s + 1) & (NSLOT - 1);
            spec_slot[s] = (int)j;
            n_spec = (int)j + 1;
        }
        Py_XDECREF(k);
        Py_XDECREF(t);
        Py_XDECREF(d);
        if (!ok || PyErr_Occurred()) return NULL;
    }
    scan_configured = 1;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ Interner */

typedef struct {
    PyObject_HEAD
    Strtab t;
} Interner;

static int Interner_init(Interner *self, PyObject *a, PyObject *k) {
    strtab_free(&self->t);
    if (strtab_init(&self->t)) { PyErr_NoMemory(); return -1; }
    return 0;
}

static void Interner_dealloc(Interner *self) {
    strtab_free(&self->t);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* add(blob, offsets) -> bytearray of int32: the id of each piece string in this table */
static PyObject *Interner_add(Interner *self, PyObject *a) {
    Py_buffer blob, offs;
    if (!PyArg_ParseTuple(a, "y*y*", &blob, &offs)) return NULL;
    Py_ssize_t n = offs.len / 8 - 1;
    PyObject *out = PyByteArray_FromStringAndSize(NULL, n > 0 ? n * 4 : 0);
    if (out && n > 0) {
        const int64_t *of = (const int64_t *)offs.buf;
        int32_t *ids = (int32_t *)PyByteArray_AS_STRING(out);
        for (Py_ssize_t i = 0; i < n; i++) {
            ids[i] = strtab_id(&self->t, (const uchar *)blob.buf + of[i], (size_t)(of[i + 1] - of[i]));
            if (ids[i] < 0) { Py_CLEAR(out); PyErr_NoMemory(); break; }
        }
    }
    PyBuffer_Release(&blob);
    PyBuffer_Release(&offs);
    return out;
}

/* strings(start=0) -> list of str; ValueError naming the string when one is not UTF-8 */
static PyObject *Interner_strings(Interner *self, PyObject *a) {
    Py_ssize_t start = 0;
    if (!PyArg_ParseTuple(a, "|n", &start)) return NULL;
    Py_ssize_t n = (Py_ssize_t)self->t.count;
    if (start > n) start = n;
    PyObject *lst = PyList_New(n - start);
    if (!lst) return NULL;
    const int64_t *of = (const int64_t *)self->t.offs.p;
    for (Py_ssize_t i = start; i < n; i++) {
        PyObject *s = PyUnicode_DecodeUTF8(self->t.arena.p + of[i], (Py_ssize_t)(of[i + 1] - of[i]), "strict");
        if (!s) { Py_DECREF(lst); return NULL; }
        PyList_SET_ITEM(lst, i - start, s);
    }
    return lst;
}

static Py_ssize_t Interner_len(Interner *self) { return (Py_ssize_t)self->t.count; }

static PyMethodDef Interner_methods[] = {
    {"add", (PyCFunction)Interner_add, METH_VARARGS, "add(blob, offsets) -> int32 ids (bytearray)"},
    {"strings", (PyCFunction)Interner_strings, METH_VARARGS, "strings(start=0) -> list[str]"},
    {NULL}};

static PySequenceMethods Interner_seq = {.sq_length = (lenfunc)Interner_len};

static PyTypeObject InternerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "holotrace.ingest._scan.Interner",
    .tp_basicsize = sizeof(Interner),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Interner_init,
    .tp_dealloc = (destructor)Interner_dealloc,
    .tp_methods = Interner_methods,
    .tp_as_sequence = &Interner_seq,
    .tp_doc = "A string table shared by the pieces of a file",
};

static PyObject *py_trim(PyObject *self, PyObject *a) {
#ifdef __GLIBC__
    malloc_trim(0);
#endif
    Py_RETURN_NONE;
}

/* Big buffers (pieces, columns) come and go many times per file: a fixed mmap threshold gives
 * each back to the system when freed, instead of leaving the heap fragmented at its peak. */
static PyObject *py_tune(PyObject *self, PyObject *a) {
    int bytes;
    if (!PyArg_ParseTuple(a, "i", &bytes)) return NULL;
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, bytes);
#endif
    Py_RETURN_NONE;
}

/* renumber(ids, remap, out, mask) -> (lo, hi): out[i] = remap[ids[i]] (ids: a piece's string ids, -1 for none,
 * reading remap's last entry; signed 1/2/4/8-byte ints), marking mask[id] (mask's last slot for -1); lo and hi are
 * out's least and greatest (0, -1 when empty). One pass in place of a gather, a fancy assignment and a min/max. */
static PyObject *py_renumber(PyObject *self, PyObject *a) {
    Py_buffer ids, remap, out, mask;
    if (!PyArg_ParseTuple(a, "y*y*w*w*", &ids, &remap, &out, &mask)) return NULL;
    PyObject *res = NULL;
    Py_ssize_t isz = ids.itemsize > 0 ? ids.itemsize : 1;
    const char *fmt = ids.format ? ids.format : "b";
    Py_ssize_t n = ids.len / isz, nr = remap.len / 4, nm = mask.len;
    if (!(isz == 1 || isz == 2 || isz == 4 || isz == 8) || strchr("BHILQ?", fmt[0]) || nr < 1 || nm < 1 ||
        out.len != n * 4) {
        PyErr_SetString(PyExc_ValueError, "renumber: ids of signed ints, int32 remap and out of their length");
        goto done;
    }
    const int32_t *rm = (const int32_t *)remap.buf;
    int32_t *o = (int32_t *)out.buf;
    unsigned char *mk = (unsigned char *)mask.buf;
    int32_t lo = 0, hi = -1;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t v = isz == 1 ? ((const int8_t *)ids.buf)[i]
                    : isz == 2 ? ((const int16_t *)ids.buf)[i]
                    : isz == 4 ? ((const int32_t *)ids.buf)[i]
                               : ((const int64_t *)ids.buf)[i];
        if (v < -1 || v >= nr - 1) { bad = 1; break; }
        int32_t id = rm[v < 0 ? nr - 1 : v];
        if (id < -1 || id >= nm - 1) { bad = 1; break; }
        mk[id < 0 ? nm - 1 : id] = 1;
        o[i] = id;
        if (i == 0 || id < lo) lo = id;
        if (i == 0 || id > hi) hi = id;
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "renumber: an id outside the remap or the mask");
        goto done;
    }
    res = Py_BuildValue("(ii)", (int)lo, (int)hi);
done:
    PyBuffer_Release(&ids);
    PyBuffer_Release(&remap);
    PyBuffer_Release(&out);
    PyBuffer_Release(&mask);
    return res;
}

static PyMethodDef methods[] = {
    {"tune_malloc", py_tune, METH_VARARGS, "tune_malloc(mmap_threshold_bytes) (glibc)"},
    {"trim", py_trim, METH_NOARGS, "return freed heap memory to the system (glibc)"},
    {"scan", py_scan, METH_VARARGS, "scan(piece: bytes, spans: bool = False) -> dict of column buffers"},
    {"configure", py_configure, METH_VARARGS, "configure(keys, kinds, defaults): the args that become columns"},
    {"renumber", py_renumber, METH_VARARGS, "renumber(ids, remap, out, mask) -> (lo, hi): ids into a file's, marked"},
    {NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_scan", "Columnar scanner of Kineto trace events", -1, methods};

PyMODINIT_FUNC PyInit__scan(void) {
    if (PyType_Ready(&InternerType) < 0 || PyType_Ready(&CBufType) < 0) return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (!m) return NULL;
    Py_INCREF(&InternerType);
    if (PyModule_AddObject(m, "Interner", (PyObject *)&InternerType) < 0) {
        Py_DECREF(&InternerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
