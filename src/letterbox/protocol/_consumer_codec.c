/* letterbox.protocol._consumer_codec -- compiled codec (issue 13); see setup.py and protocol/speedups.py.
 * Skeleton: functions are added with their pure-Python references and parity tests. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyMethodDef methods[] = {
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "letterbox.protocol._consumer_codec", NULL, -1, methods,
};

PyMODINIT_FUNC PyInit__consumer_codec(void) { return PyModule_Create(&module); }
