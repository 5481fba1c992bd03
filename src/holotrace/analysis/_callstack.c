/* The call-stack sweep of holotrace.analysis.callstack: the endpoints of events in their order (each event's open
 * before its close), a stack of the open events; an open's level is the stack's size and its parent the event on
 * top, a close pops whatever is on top (as HTA's sweep).
 *
 * nest(node, is_open, level, parent): node (int64, 2m: the event of each endpoint), is_open (bool, 2m); writes
 * level and parent (int64, m; -1: no parent). With rows (int64, m: each event's row) and parent of any length,
 * writes parent[rows[event]] = rows[its parent] for the events that have one instead (level: m values, or none).
 * Raises ValueError for an event out of range or opened twice, or a row out of range.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static int get(PyObject *o, Py_buffer *b, Py_ssize_t itemsize, int writable, const char *what) {
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, b, flags) < 0) return -1;
    if (b->itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "nest: %s has items of %zd bytes, expected %zd", what, b->itemsize, itemsize);
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

static PyObject *nest(PyObject *self, PyObject *args) {
    PyObject *o[5] = {NULL, NULL, NULL, NULL, NULL};
    const char *names[5] = {"node", "is_open", "level", "parent", "rows"};
    const Py_ssize_t sizes[5] = {8, 1, 8, 8, 8};
    Py_buffer b[5];
    if (!PyArg_UnpackTuple(args, "nest", 4, 5, &o[0], &o[1], &o[2], &o[3], &o[4])) return NULL;
    int k = o[4] ? 5 : 4;
    for (int i = 0; i < k; i++) {
        if (get(o[i], &b[i], sizes[i], i == 2 || i == 3, names[i]) < 0) {
            while (i--) PyBuffer_Release(&b[i]);
            return NULL;
        }
    }
    Py_ssize_t n = b[0].len / 8, m = n / 2, nl = b[2].len / 8, np_ = b[3].len / 8;
    const int64_t *rows = k == 5 ? b[4].buf : NULL;
    int bad = b[1].len != n || n != 2 * m || (rows ? (b[4].len / 8 != m || (nl != m && nl != 0)) : (nl != m || np_ != m));
    int64_t *stack = bad ? NULL : PyMem_Malloc((size_t)(m ? m : 1) * sizeof(int64_t));
    if (!bad && !stack) {
        for (int i = 0; i < k; i++) PyBuffer_Release(&b[i]);
        return PyErr_NoMemory();
    }
    if (!bad) {
        const int64_t *node = b[0].buf;
        const uint8_t *is_open = b[1].buf;
        int64_t *level = nl ? b[2].buf : NULL, *parent = b[3].buf;
        Py_BEGIN_ALLOW_THREADS;
        Py_ssize_t sp = 0;
        for (Py_ssize_t j = 0; j < n; j++) {
            int64_t x = node[j];
            if (x < 0 || x >= m) {
                bad = 2;
                break;
            }
            if (!is_open[j]) {
                if (sp > 0) sp--;
                continue;
            }
            if (sp >= m) {
                bad = 2;
                break;
            }
            int64_t top = sp ? stack[sp - 1] : -1;
            if (level) level[x] = sp;
            if (!rows) {
                parent[x] = top;
            } else if (top >= 0) {
                int64_t r = rows[x];
                if (r < 0 || r >= np_) {
                    bad = 3;
                    break;
                }
                parent[r] = rows[top];
            }
            stack[sp++] = x;
        }
        Py_END_ALLOW_THREADS;
        PyMem_Free(stack);
    }
    for (int i = 0; i < k; i++) PyBuffer_Release(&b[i]);
    if (bad == 1) return PyErr_Format(PyExc_ValueError, "nest: the arrays' lengths do not match");
    if (bad == 2) return PyErr_Format(PyExc_ValueError, "nest: an endpoint's event is out of range or opened twice");
    if (bad) return PyErr_Format(PyExc_ValueError, "nest: a row is out of range of parent");
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"nest", nest, METH_VARARGS, "nest(node, is_open, level, parent[, rows]): the call-stack sweep (see the module)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_callstack", "The call-stack sweep.", -1, methods};

PyMODINIT_FUNC PyInit__callstack(void) { return PyModule_Create(&module); }
