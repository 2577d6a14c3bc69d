/* One pass over a block of sample lines whose label sets were proven on an earlier scrape.
 *
 * The compiled half of ``metricbridge.exposition.line_match``, which holds the pure-Python
 * fallback, the specification this file must agree with byte for byte, and the reasons. Here:
 * walk the block once, compare each line's head with the proven one in place (memcmp), and
 * make objects only for the values a caller needs, instead of copying the block, splitting it
 * into 2n + 1 objects and slicing those into two lists.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

/* An unsigned value of a canonical shape (model.numbers): digits with an optional fraction, or
 * a fraction alone, then an optional exponent. At most 199 digits before the point and a
 * positive exponent of at most two digits keep it inside a float's range. */
static int
simple_value(const char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0, digits = 0, fraction = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
        i++;
    }
    digits = i;
    if (digits > 199) {
        return 0;
    }
    if (i < n && s[i] == '.') {
        Py_ssize_t start = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            i++;
        }
        fraction = i - start;
        if (digits == 0 && fraction == 0) {
            return 0;
        }
    }
    else if (digits == 0) {
        return 0;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        Py_ssize_t start;
        i++;
        if (i < n && s[i] == '-') {
            start = ++i;
            while (i < n && s[i] >= '0' && s[i] <= '9') {
                i++;
            }
            if (i == start) {
                return 0;
            }
        }
        else {
            if (i < n && s[i] == '+') {
                i++;
            }
            start = i;
            while (i < n && s[i] >= '0' && s[i] <= '9') {
                i++;
            }
            if (i == start || i - start > 2) {
                return 0;
            }
        }
    }
    return i == n;
}

static PyObject *
match_heads(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "match_heads(payload, start, end, heads, want_values)");
        return NULL;
    }
    PyObject *payload = args[0], *heads = args[3];
    if (!PyBytes_CheckExact(payload) || !PyList_CheckExact(heads)) {
        PyErr_SetString(PyExc_TypeError, "match_heads takes bytes, two offsets and a list");
        return NULL;
    }
    Py_ssize_t offset = PyNumber_AsSsize_t(args[1], PyExc_OverflowError);
    if (offset == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t stop = PyNumber_AsSsize_t(args[2], PyExc_OverflowError);
    if (stop == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (offset < 0 || stop < offset || stop > PyBytes_GET_SIZE(payload)) {
        PyErr_SetString(PyExc_ValueError, "match_heads: the block is not inside the payload");
        return NULL;
    }
    int want_values = PyObject_IsTrue(args[4]);
    if (want_values < 0) {
        return NULL;
    }
    /* The block is read where it lies in the payload: slicing it out first would copy every
     * block of every scrape, and hold the largest on the heap while it is read. */
    const char *data = PyBytes_AS_STRING(payload) + offset;
    Py_ssize_t size = stop - offset, count = PyList_GET_SIZE(heads);
    if (count == 0) {
        Py_RETURN_NONE;
    }
    /* Value offsets first; objects only once the whole block is known to match. */
    Py_ssize_t *spans = PyMem_Malloc(sizeof(Py_ssize_t) * 2 * (size_t)count);
    if (spans == NULL) {
        return PyErr_NoMemory();
    }
    int simple = 1;
    Py_ssize_t pos = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *head = PyList_GET_ITEM(heads, i);
        if (!PyBytes_CheckExact(head)) {
            goto mismatch;
        }
        Py_ssize_t length = PyBytes_GET_SIZE(head);
        if (length > size - pos || memcmp(data + pos, PyBytes_AS_STRING(head), length) != 0) {
            goto mismatch;
        }
        pos += length;
        if (pos >= size || data[pos] != ' ') {
            goto mismatch;
        }
        Py_ssize_t start = ++pos;
        const char *newline = memchr(data + start, '\n', size - start);
        if (newline == NULL) {
            goto mismatch;
        }
        Py_ssize_t end = newline - data;
        if (memchr(data + start, ' ', end - start) != NULL) {
            goto mismatch;
        }
        if (simple && !simple_value(data + start, end - start)) {
            simple = 0;
        }
        spans[2 * i] = start;
        spans[2 * i + 1] = end;
        pos = end; /* the next head starts with this newline */
    }
    if (pos != size - 1) {
        goto mismatch;
    }
    PyObject *values = Py_None;
    if (want_values || !simple) {
        values = PyList_New(count);
        if (values == NULL) {
            PyMem_Free(spans);
            return NULL;
        }
        for (Py_ssize_t i = 0; i < count; i++) {
            PyObject *value =
                PyBytes_FromStringAndSize(data + spans[2 * i], spans[2 * i + 1] - spans[2 * i]);
            if (value == NULL) {
                Py_DECREF(values);
                PyMem_Free(spans);
                return NULL;
            }
            PyList_SET_ITEM(values, i, value);
        }
    }
    else {
        Py_INCREF(values);
    }
    PyMem_Free(spans);
    PyObject *result = PyTuple_New(2);
    if (result == NULL) {
        Py_DECREF(values);
        return NULL;
    }
    PyTuple_SET_ITEM(result, 0, PyBool_FromLong(simple));
    PyTuple_SET_ITEM(result, 1, values);
    return result;

mismatch:
    PyMem_Free(spans);
    Py_RETURN_NONE;
}

/* Where the block starting at ``pos`` ends: at the next line that starts with '#', or ``size``. */
static Py_ssize_t
block_end(const char *data, Py_ssize_t pos, Py_ssize_t size)
{
    while (pos < size) {
        const char *hash = memchr(data + pos, '#', size - pos);
        if (hash == NULL) {
            return size;
        }
        Py_ssize_t at = hash - data;
        if (at > 0 && data[at - 1] == '\n') {
            return at;
        }
        pos = at + 1;
    }
    return size;
}

/* A payload against a remembered layout (exposition.layout_walk, whose Python walk is the
 * specification): each family's header bytes compared in place, then its block's heads as
 * match_heads compares them, values made where ``wanted`` or not simple (a family with None
 * for heads: its block runs to the next '#' line, for Python to read). One (end, simple,
 * values) per family, simple None where the heads differ; None if a header differs or a block
 * is missing; the tail after the last family is the caller's to compare. */
static PyObject *
walk_layout(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "walk_layout(payload, headers, heads, wanted)");
        return NULL;
    }
    PyObject *payload = args[0], *headers = args[1], *all_heads = args[2], *wanted = args[3];
    if (!PyBytes_CheckExact(payload) || !PyList_CheckExact(headers) ||
        !PyList_CheckExact(all_heads) || !PyList_CheckExact(wanted) ||
        PyList_GET_SIZE(headers) != PyList_GET_SIZE(all_heads) ||
        PyList_GET_SIZE(headers) != PyList_GET_SIZE(wanted)) {
        PyErr_SetString(PyExc_TypeError, "walk_layout takes bytes and two lists of one length");
        return NULL;
    }
    const char *data = PyBytes_AS_STRING(payload);
    Py_ssize_t size = PyBytes_GET_SIZE(payload), families = PyList_GET_SIZE(headers);
    PyObject *out = PyList_New(families);
    if (out == NULL) {
        return NULL;
    }
    Py_ssize_t pos = 0;
    for (Py_ssize_t f = 0; f < families; f++) {
        PyObject *header = PyList_GET_ITEM(headers, f), *heads = PyList_GET_ITEM(all_heads, f);
        if (!PyBytes_CheckExact(header)) {
            goto mismatch;
        }
        Py_ssize_t length = PyBytes_GET_SIZE(header);
        if (length > size - pos || memcmp(data + pos, PyBytes_AS_STRING(header), length) != 0) {
            goto mismatch;
        }
        pos += length;
        PyObject *entry;
        if (heads == Py_None) {
            Py_ssize_t end = block_end(data, pos, size);
            entry = Py_BuildValue("(nOO)", end, Py_False, Py_None);
            pos = end;
        }
        else {
            if (!PyList_CheckExact(heads) || pos >= size || data[pos] == '#' ||
                data[pos] == '\n') {
                goto mismatch;
            }
            /* The block is the family's heads and values; match_heads finds where it ends. */
            PyObject *call[5] = {payload, NULL, NULL, heads, PyList_GET_ITEM(wanted, f)};
            Py_ssize_t end = block_end(data, pos, size);
            call[1] = PyLong_FromSsize_t(pos);
            call[2] = PyLong_FromSsize_t(end);
            if (call[1] == NULL || call[2] == NULL) {
                Py_XDECREF(call[1]);
                Py_XDECREF(call[2]);
                Py_DECREF(out);
                return NULL;
            }
            PyObject *matched = match_heads(NULL, call, 5);
            Py_DECREF(call[1]);
            Py_DECREF(call[2]);
            if (matched == NULL) {
                Py_DECREF(out);
                return NULL;
            }
            if (matched == Py_None) {
                /* Other heads than remembered: the block is Python's to prove afresh. */
                entry = Py_BuildValue("(nOO)", end, Py_None, Py_None);
            }
            else {
                entry = Py_BuildValue(
                    "(nOO)", end, PyTuple_GET_ITEM(matched, 0), PyTuple_GET_ITEM(matched, 1));
            }
            Py_DECREF(matched);
            pos = end;
        }
        if (entry == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, f, entry);
    }
    return out;

mismatch:
    Py_DECREF(out);
    Py_RETURN_NONE;
}

static PyObject *
is_simple_value(PyObject *module, PyObject *value)
{
    (void)module;
    if (!PyBytes_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "is_simple_value takes bytes");
        return NULL;
    }
    return PyBool_FromLong(simple_value(PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value)));
}

/* Digits with an optional fraction, 15 significant digits at most: the integer they spell and
 * a power of ten are exact doubles, so one division rounds as strtod does (Clinger's fast path).
 * Engines write most counts and bucket values so; anything else goes to PyOS_string_to_double. */
static const double POWERS_OF_TEN[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7,
                                       1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};

static int
exact_decimal(const char *s, Py_ssize_t n, double *out)
{
    if (n == 0 || n > 16) {
        return 0;
    }
    long long mantissa = 0;
    Py_ssize_t digits = 0, scale = 0;
    int point = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        char c = s[i];
        if (c >= '0' && c <= '9') {
            mantissa = mantissa * 10 + (c - '0');
            digits++;
            scale += point;
        }
        else if (c == '.' && !point) {
            point = 1;
        }
        else {
            return 0;
        }
    }
    if (digits == 0 || digits > 15) {
        return 0;
    }
    *out = (double)mantissa / POWERS_OF_TEN[scale];
    return 1;
}

/* The number each value spells; -1 (no exception set) when one is not a finite or infinite
 * number as written, for the caller to decide in Python. */
static int
parse_values(PyObject *values, double *out)
{
    Py_ssize_t count = PyList_GET_SIZE(values);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *value = PyList_GET_ITEM(values, i);
        if (!PyBytes_CheckExact(value) || PyBytes_GET_SIZE(value) == 0) {
            return -1;
        }
        const char *text = PyBytes_AS_STRING(value);
        if (exact_decimal(text, PyBytes_GET_SIZE(value), &out[i])) {
            continue;
        }
        char *end = NULL;
        double number = PyOS_string_to_double(text, &end, NULL);
        if (number == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return -1;
        }
        if (end != text + PyBytes_GET_SIZE(value) || Py_IS_NAN(number)) {
            return -1;
        }
        out[i] = number;
    }
    return 0;
}

/* Each index of ``indexes`` as a C index into ``count`` values; -1 for anything else. */
static int
line_index(PyObject *indexes, Py_ssize_t k, Py_ssize_t count, Py_ssize_t *out)
{
    PyObject *item = PyList_GET_ITEM(indexes, k);
    if (!PyLong_CheckExact(item)) {
        return -1;
    }
    Py_ssize_t index = PyLong_AsSsize_t(item);
    if (index == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    if (index < 0 || index >= count) {
        return -1;
    }
    *out = index;
    return 0;
}

/* raw_rules.values_agree over a layout's index lists: True, False, or None to decide in
 * Python (a value that is not plainly a number, or an index list that is not one). */
static PyObject *
values_agree(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "values_agree(values, whole, lower, upper, counts, infs, summary)");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < 6; i++) {
        if (!PyList_CheckExact(args[i])) {
            PyErr_SetString(PyExc_TypeError, "values_agree takes lists");
            return NULL;
        }
    }
    int summary = PyObject_IsTrue(args[6]);
    if (summary < 0) {
        return NULL;
    }
    PyObject *values = args[0], *whole = args[1], *lower = args[2], *upper = args[3];
    PyObject *counts = args[4], *infs = args[5];
    Py_ssize_t count = PyList_GET_SIZE(values);
    if (PyList_GET_SIZE(lower) != PyList_GET_SIZE(upper) ||
        PyList_GET_SIZE(counts) != PyList_GET_SIZE(infs)) {
        Py_RETURN_NONE;
    }
    double *numbers = PyMem_Malloc(sizeof(double) * (size_t)(count ? count : 1));
    if (numbers == NULL) {
        return PyErr_NoMemory();
    }
    PyObject *verdict = Py_True;
    Py_ssize_t a, b;
    if (parse_values(values, numbers) < 0) {
        goto undecided;
    }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(whole); k++) {
        if (line_index(whole, k, count, &a) < 0) {
            goto undecided;
        }
        if (!isfinite(numbers[a]) || floor(numbers[a]) != numbers[a]) {
            verdict = Py_False;
            goto done;
        }
    }
    if (summary) {
        goto done;
    }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(lower); k++) {
        if (line_index(lower, k, count, &a) < 0 || line_index(upper, k, count, &b) < 0) {
            goto undecided;
        }
        if (!(numbers[a] <= numbers[b])) {
            verdict = Py_False;
            goto done;
        }
    }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(counts); k++) {
        if (line_index(counts, k, count, &a) < 0 || line_index(infs, k, count, &b) < 0) {
            goto undecided;
        }
        if (numbers[a] != numbers[b]) {
            verdict = Py_False;
            goto done;
        }
    }
done:
    PyMem_Free(numbers);
    Py_INCREF(verdict);
    return verdict;
undecided:
    PyMem_Free(numbers);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"values_agree", (PyCFunction)(void (*)(void))values_agree, METH_FASTCALL,
     "values_agree(values, whole, lower, upper, counts, infs, summary) -> bool or None"},
    {"match_heads", (PyCFunction)(void (*)(void))match_heads, METH_FASTCALL,
     "match_heads(payload, start, end, heads, want_values) -> (simple, values) or None"},
    {"walk_layout", (PyCFunction)(void (*)(void))walk_layout, METH_FASTCALL,
     "walk_layout(payload, headers, heads, wanted) -> [(end, simple, values)] or None"},
    {"is_simple_value", is_simple_value, METH_O, "is_simple_value(value) -> bool"},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot slots[] = {
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_linescan", NULL, 0, methods, slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__linescan(void)
{
    return PyModuleDef_Init(&module_def);
}
