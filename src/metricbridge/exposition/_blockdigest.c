/* A block of sample lines digested in one pass, for blocks too big to remember the heads of.
 *
 * The compiled half of ``metricbridge.exposition.block_digest``, whose ``digest_python`` is the
 * specification this file must agree with, result for result, and which says why. Here: walk
 * the block once where it lies; per line, its head (up to the one space) is hashed, so that a
 * repeated head is found by sorting the hashes, without an object per line; its skeleton (the
 * head with each quoted label value cut out) and its value's shape (model.numbers.VALUE_SHAPE)
 * go into small sets. Only the distinct skeletons and shapes become objects. Two heads of one
 * hash are left to the caller (False), who compares their bytes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* FNV-1a, 64 bits: heads differ in a label value's digits, which it mixes well. */
static uint64_t
fnv(const char *s, Py_ssize_t n, uint64_t h)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

#define FNV_START 14695981039346656037ULL

/* A head's hash, eight bytes at a time: a head is hashed once per line, a million times for a
 * family of 10^6 series. Never 0, which marks an empty slot. */
static uint64_t
head_hash(const char *s, Py_ssize_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t word;
        memcpy(&word, s + i, 8);
        h = (h ^ word) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
    }
    uint64_t tail = 0;
    memcpy(&tail, s + i, n - i);
    h = (h ^ tail) * 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 29;
    return h | 1;
}

/* Whether any two of ``n`` hashes are equal: sorted a byte at a time (eight passes over the
 * array, each in order, where a hash set's probes land anywhere in a table of tens of MB and
 * miss the cache and the TLB on nearly every line), then neighbours compared. */
static int
hashes_repeat(uint64_t *hashes, uint64_t *spare, Py_ssize_t n)
{
    for (int shift = 0; shift < 64; shift += 8) {
        Py_ssize_t count[257] = {0};
        for (Py_ssize_t i = 0; i < n; i++) {
            count[((hashes[i] >> shift) & 0xFF) + 1]++;
        }
        for (int b = 0; b < 256; b++) {
            count[b + 1] += count[b];
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            spare[count[(hashes[i] >> shift) & 0xFF]++] = hashes[i];
        }
        uint64_t *swap = hashes;
        hashes = spare;
        spare = swap;
    }
    /* Eight passes: the sorted hashes are back in the first array. */
    for (Py_ssize_t i = 1; i < n; i++) {
        if (hashes[i] == hashes[i - 1]) {
            return 1;
        }
    }
    return 0;
}

/* A set of byte strings, open addressing, keeping copies: the skeletons and the value shapes,
 * built in a scratch buffer; a few dozen per block. */
typedef struct {
    const char **text;
    Py_ssize_t *len;
    uint64_t *hash;
    size_t mask, used;
} Strings;

static int
strings_init(Strings *set, size_t expected)
{
    size_t capacity = 16;
    while (capacity < expected * 2) {
        capacity <<= 1;
    }
    set->text = PyMem_Calloc(capacity, sizeof(char *));
    set->len = PyMem_Calloc(capacity, sizeof(Py_ssize_t));
    set->hash = PyMem_Calloc(capacity, sizeof(uint64_t));
    set->mask = capacity - 1;
    set->used = 0;
    return set->text && set->len && set->hash ? 0 : -1;
}

static void
strings_free(Strings *set, int with_strings)
{
    if (with_strings && set->text != NULL) {
        for (size_t i = 0; i <= set->mask; i++) {
            PyMem_Free((void *)set->text[i]);
        }
    }
    PyMem_Free((void *)set->text);
    PyMem_Free(set->len);
    PyMem_Free(set->hash);
}

static int
strings_grow(Strings *set)
{
    Strings bigger;
    if (strings_init(&bigger, set->mask + 1) < 0) {
        strings_free(&bigger, 0);
        return -1;
    }
    for (size_t i = 0; i <= set->mask; i++) {
        if (set->text[i] != NULL) {
            size_t slot = set->hash[i] & bigger.mask;
            while (bigger.text[slot] != NULL) {
                slot = (slot + 1) & bigger.mask;
            }
            bigger.text[slot] = set->text[i];
            bigger.len[slot] = set->len[i];
            bigger.hash[slot] = set->hash[i];
            bigger.used++;
        }
    }
    strings_free(set, 0); /* the strings moved: only the arrays go */
    *set = bigger;
    return 0;
}

/* 1: added; 0: already there; -1: out of memory. */
static int
strings_add(Strings *set, const char *s, Py_ssize_t n)
{
    uint64_t h = fnv(s, n, FNV_START);
    size_t slot = h & set->mask;
    while (set->text[slot] != NULL) {
        if (set->hash[slot] == h && set->len[slot] == n && memcmp(set->text[slot], s, n) == 0) {
            return 0;
        }
        slot = (slot + 1) & set->mask;
    }
    char *copy = PyMem_Malloc(n ? n : 1);
    if (copy == NULL) {
        return -1;
    }
    memcpy(copy, s, n);
    set->text[slot] = copy;
    set->len[slot] = n;
    set->hash[slot] = h;
    if (++set->used * 2 > set->mask + 1 && strings_grow(set) < 0) {
        return -1;
    }
    return 1;
}

static PyObject *
strings_list(Strings *set)
{
    PyObject *out = PyList_New(0);
    for (size_t i = 0; out != NULL && i <= set->mask; i++) {
        if (set->text[i] != NULL) {
            PyObject *item = PyBytes_FromStringAndSize(set->text[i], set->len[i]);
            if (item == NULL || PyList_Append(out, item) < 0) {
                Py_XDECREF(item);
                Py_CLEAR(out);
                break;
            }
            Py_DECREF(item);
        }
    }
    return out;
}

/* digest(payload, start, end) -> (lines, skeletons, shapes), None, or False; see
 * block_digest. */
static PyObject *
digest(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Py_ssize_t start, end;
    if (nargs != 3 || !PyBytes_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "digest(payload, start, end)");
        return NULL;
    }
    start = PyLong_AsSsize_t(args[1]);
    end = PyLong_AsSsize_t(args[2]);
    if ((start == -1 || end == -1) && PyErr_Occurred()) {
        return NULL;
    }
    const char *data = PyBytes_AS_STRING(args[0]);
    if (start < 0 || end > PyBytes_GET_SIZE(args[0]) || start >= end) {
        Py_RETURN_NONE;
    }
    if (end - start > (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "digest: a block of 4 GiB or more");
        return NULL;
    }
    Py_ssize_t newlines = 0;
    for (const char *p = data + start; (p = memchr(p, '\n', data + end - p)) != NULL; p++) {
        newlines++;
    }
    /* Each line's head hash, then a spare array for the sort. */
    uint64_t *hashes = PyMem_Malloc(sizeof(uint64_t) * (newlines ? newlines : 1));
    uint64_t *spare = PyMem_Malloc(sizeof(uint64_t) * (newlines ? newlines : 1));
    Strings skeletons, shapes;
    skeletons.text = shapes.text = NULL;
    skeletons.len = shapes.len = NULL;
    skeletons.hash = shapes.hash = NULL;
    char *scratch = NULL, *last = NULL; /* ``last``: the skeleton of the line before */
    Py_ssize_t last_skeleton = -1;
    PyObject *result = NULL;
    int failed = hashes == NULL || spare == NULL || strings_init(&skeletons, 8) < 0 ||
                 strings_init(&shapes, 64) < 0;
    Py_ssize_t lines = 0, room = 0, pos = start;
    while (!failed && pos < end) {
        const char *line = data + pos;
        const char *eol = memchr(line, '\n', end - pos);
        if (eol == NULL) {
            goto refused; /* the last line has no newline */
        }
        Py_ssize_t length = eol - line;
        const char *space = memchr(line, ' ', length);
        if (space == NULL || memchr(space + 1, ' ', eol - space - 1) != NULL) {
            goto refused; /* not exactly one space: not HEAD VALUE */
        }
        Py_ssize_t head = space - line, value = eol - space - 1;
        hashes[lines] = head_hash(line, head);
        if (head + 2 > room || value + 1 > room) {
            Py_ssize_t wanted = head + 2 > value + 1 ? head + 2 : value + 1;
            room = 2 * wanted > 256 ? 2 * wanted : 256;
            PyMem_Free(scratch);
            PyMem_Free(last);
            scratch = PyMem_Malloc(room);
            last = PyMem_Malloc(room);
            last_skeleton = -1; /* what ``last`` held is gone */
            if (scratch == NULL || last == NULL) {
                failed = 1;
                break;
            }
        }
        /* The skeleton: the newline before the line, then the head with each quoted run cut
         * to the quotes around it, as '"'.join(head.split('"')[0::2]) makes it; copied a run
         * at a time between quotes. */
        Py_ssize_t n = 0, quotes = 0, i = 0;
        scratch[n++] = '\n';
        while (i < head) {
            const char *quote = memchr(line + i, '"', head - i);
            Py_ssize_t stop = quote ? quote - line : head;
            if (quotes % 2 == 0) {
                memcpy(scratch + n, line + i, stop - i);
                n += stop - i;
            }
            if (quote == NULL) {
                break;
            }
            if (++quotes % 2 == 1) {
                scratch[n++] = '"';
            }
            i = stop + 1;
        }
        if (quotes % 2 == 1) {
            goto refused; /* a quote that is no label value's */
        }
        /* Lines of one family nearly all share a skeleton: the one before is checked first. */
        if (n != last_skeleton || memcmp(scratch, last, n) != 0) {
            if (strings_add(&skeletons, scratch, n) < 0) {
                failed = 1;
                break;
            }
            memcpy(last, scratch, n);
            last_skeleton = n;
        }
        for (i = 0; i < value; i++) {
            char c = space[1 + i];
            scratch[i] = (c >= '1' && c <= '9') ? '0' : (c == 'E' ? 'e' : c);
        }
        if (strings_add(&shapes, scratch, value) < 0) {
            failed = 1;
            break;
        }
        lines++;
        pos = eol - data + 1;
    }
    if (!failed && hashes_repeat(hashes, spare, lines)) {
        /* Two heads with one hash: most likely one series twice, but only the bytes can say;
         * the caller proves the block by splitting it, as it proves any other. */
        result = Py_False;
        Py_INCREF(result);
        goto done;
    }
    if (!failed) {
        PyObject *skeleton_list = strings_list(&skeletons), *shape_list = strings_list(&shapes);
        if (skeleton_list != NULL && shape_list != NULL) {
            result = Py_BuildValue("(nOO)", lines, skeleton_list, shape_list);
        }
        Py_XDECREF(skeleton_list);
        Py_XDECREF(shape_list);
    }
    else {
        PyErr_NoMemory();
    }
    goto done;
refused:
    result = Py_None;
    Py_INCREF(result);
done:
    PyMem_Free(scratch);
    PyMem_Free(last);
    PyMem_Free(hashes);
    PyMem_Free(spare);
    strings_free(&skeletons, 1);
    strings_free(&shapes, 1);
    return result;
}

static PyMethodDef methods[] = {
    {"digest", (PyCFunction)(void (*)(void))digest, METH_FASTCALL,
     "digest(payload, start, end) -> (lines, skeletons, shapes), None or False"},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot slots[] = {
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_blockdigest", NULL, 0, methods, slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__blockdigest(void)
{
    return PyModuleDef_Init(&module_def);
}
