/* letterbox.protocol._consumer_codec -- the consumer-side frames of the hot path in C (issue 13):
 *   message_frame    one MESSAGE frame (reference: protocol/receipts.py message(), MessageEncoder)
 *   message_frames   a run's MESSAGE frames as one bytes object (reference: receipts.message_frames)
 *   pending_receipts the SEND_RECEIPTs of a producer's pass (reference: receipts.pending_receipts)
 *   decode_ack       the common CommandAck shape (reference: protocol/ack_decoder.py decode_ack_py)
 * tests/protocol/test_consumer_codec*.py compare each with its reference byte for byte.
 *
 * Invariants: encoders write protobuf's bytes (fields in field-number order, base-128 varints,
 * ack_set words as 64-bit two's complement, unpacked) exactly as the references do; every read of
 * an ACK's bytes (a hostile client's) is bounds-checked before it happens; decode_ack never raises
 * for bad bytes, it returns None and the caller takes the protobuf path (which raises as before);
 * no static mutable state; every new reference has one owner and is released on every path. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define T_SEND_RECEIPT 7
#define T_MESSAGE 9
#define T_ACK 10
#define NARGS(name, k) if (nargs != k) { \
    PyErr_Format(PyExc_TypeError, name "() takes " #k " arguments (%zd given)", nargs); return NULL; }

static inline size_t vlen(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) { v >>= 7; n++; }
    return n;
}

static inline unsigned char *put(unsigned char *p, uint64_t v) {
    while (v >= 0x80) { *p++ = (unsigned char)(v | 0x80); v >>= 7; }
    *p++ = (unsigned char)v;
    return p;
}

static inline unsigned char *put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16); p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
    return p + 4;
}

/* an unsigned 64-bit id: OverflowError below 0 or from 2**64, TypeError for a non-int */
static int as_u64(PyObject *o, uint64_t *out) {
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *out = (uint64_t)v;
    return 0;
}

/* ---------------------------------------------------------------- MESSAGE */

static PyObject *message_frame(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    NARGS("message_frame", 7)
    uint64_t cid, ledger, entry, rc;
    if (as_u64(args[0], &cid) < 0 || as_u64(args[1], &ledger) < 0 || as_u64(args[2], &entry) < 0) return NULL;
    long long partition = PyLong_AsLongLong(args[3]);
    if (partition == -1 && PyErr_Occurred()) return NULL;
    if (as_u64(args[4], &rc) < 0) return NULL;
    PyObject *words = NULL;
    Py_ssize_t nwords = 0;
    if (args[5] != Py_None) {
        words = PySequence_Fast(args[5], "ack_set must be a sequence of ints or None");
        if (words == NULL) return NULL;
        nwords = PySequence_Fast_GET_SIZE(words);
    }
    Py_buffer data;
    if (PyObject_GetBuffer(args[6], &data, PyBUF_SIMPLE) < 0) {
        Py_XDECREF(words);
        return NULL;
    }
    PyObject *out = NULL;
    unsigned char small[256];
    unsigned char *body = small;
    /* message id: ledger, entry, partition when >= 0 (at most 33 bytes) */
    unsigned char mid[40];
    unsigned char *m = mid;
    *m++ = 0x08; m = put(m, ledger);
    *m++ = 0x10; m = put(m, entry);
    if (partition >= 0) { *m++ = 0x18; m = put(m, (uint64_t)partition); }
    size_t midlen = (size_t)(m - mid);
    size_t cap = 1 + 10 + 1 + 1 + midlen + 11 + (size_t)nwords * 11;
    if (cap > sizeof small) {
        body = PyMem_Malloc(cap);
        if (body == NULL) { PyErr_NoMemory(); goto done; }
    }
    unsigned char *b = body;
    *b++ = 0x08; b = put(b, cid);
    *b++ = 0x12; *b++ = (unsigned char)midlen;
    memcpy(b, mid, midlen); b += midlen;
    if (rc) { *b++ = 0x18; b = put(b, rc); }
    for (Py_ssize_t i = 0; i < nwords; i++) {
        unsigned long long w = PyLong_AsUnsignedLongLongMask(PySequence_Fast_GET_ITEM(words, i));
        if (w == (unsigned long long)-1 && PyErr_Occurred()) goto done;
        *b++ = 0x20; b = put(b, (uint64_t)w);
    }
    size_t blen = (size_t)(b - body);
    size_t cmdlen = 3 + vlen(blen) + blen;
    size_t total = 4 + cmdlen + (size_t)data.len;  /* the frame's first u32: all but itself */
    if (total > UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "MESSAGE frame larger than 4 GiB");
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(4 + total));
    if (out == NULL) goto done;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    o = put_u32(o, (uint32_t)total);
    o = put_u32(o, (uint32_t)cmdlen);
    *o++ = 0x08; *o++ = T_MESSAGE; *o++ = 0x4A;
    o = put(o, blen);
    memcpy(o, body, blen); o += blen;
    if (data.len) memcpy(o, data.buf, (size_t)data.len);
done:
    if (body != small) PyMem_Free(body);
    PyBuffer_Release(&data);
    Py_XDECREF(words);
    return out;
}

/* the size of a bytes-like object (a Row's stored data: bytes, anything else through a buffer) */
static Py_ssize_t data_len(PyObject *o) {
    if (PyBytes_CheckExact(o)) return PyBytes_GET_SIZE(o);
    Py_buffer b;
    if (PyObject_GetBuffer(o, &b, PyBUF_SIMPLE) < 0) return -1;
    Py_ssize_t n = b.len;
    PyBuffer_Release(&b);
    return n;
}

/* message_frame(cid, ledger, entry, partition, 0, None, data) for every (entry, data), back to back */
static PyObject *message_frames(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    NARGS("message_frames", 5)
    uint64_t cid, ledger, entry;
    if (as_u64(args[0], &cid) < 0 || as_u64(args[1], &ledger) < 0) return NULL;
    long long partition = PyLong_AsLongLong(args[2]);
    if (partition == -1 && PyErr_Occurred()) return NULL;
    PyObject *out = NULL, *ids = NULL, *datas = PySequence_Fast(args[4], "datas must be a sequence");
    if (datas == NULL) return NULL;
    ids = PySequence_Fast(args[3], "entry_ids must be a sequence");
    if (ids == NULL) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(ids);
    if (PySequence_Fast_GET_SIZE(datas) != n) {
        PyErr_SetString(PyExc_ValueError, "entry_ids and datas differ in length");
        goto done;
    }
    /* a frame's message id without its entry id; the body around it (< 128 bytes: one-byte lengths) */
    size_t mid_fixed = 1 + vlen(ledger) + 1 + (partition >= 0 ? 1 + vlen((uint64_t)partition) : 0);
    size_t body_fixed = 1 + vlen(cid) + 2;
    size_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {  /* sizes first: one allocation */
        Py_ssize_t len = data_len(PySequence_Fast_GET_ITEM(datas, i));
        if (len < 0 || as_u64(PySequence_Fast_GET_ITEM(ids, i), &entry) < 0) goto done;
        size_t frame = 4 + 4 + body_fixed + mid_fixed + vlen(entry) + (size_t)len;
        if (frame > UINT32_MAX || total > (size_t)PY_SSIZE_T_MAX - 4 - frame) {
            PyErr_SetString(PyExc_OverflowError, "MESSAGE frames larger than the address space");
            goto done;
        }
        total += 4 + frame;
    }
    out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (out == NULL) goto done;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out), *end = o + total;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_buffer data;
        if (as_u64(PySequence_Fast_GET_ITEM(ids, i), &entry) < 0 ||
            PyObject_GetBuffer(PySequence_Fast_GET_ITEM(datas, i), &data, PyBUF_SIMPLE) < 0) {
            Py_CLEAR(out);
            goto done;
        }
        size_t midlen = mid_fixed + vlen(entry);
        size_t blen = body_fixed + midlen;
        size_t cmdlen = 4 + blen;
        if (8 + cmdlen + (size_t)data.len > (size_t)(end - o)) {  /* changed since it was measured */
            PyBuffer_Release(&data);
            PyErr_SetString(PyExc_RuntimeError, "message_frames: an entry's data changed size");
            Py_CLEAR(out);
            goto done;
        }
        o = put_u32(o, (uint32_t)(4 + cmdlen + (size_t)data.len));
        o = put_u32(o, (uint32_t)cmdlen);
        *o++ = 0x08; *o++ = T_MESSAGE; *o++ = 0x4A; *o++ = (unsigned char)blen;
        *o++ = 0x08; o = put(o, cid);
        *o++ = 0x12; *o++ = (unsigned char)midlen;
        *o++ = 0x08; o = put(o, ledger);
        *o++ = 0x10; o = put(o, entry);
        if (partition >= 0) { *o++ = 0x18; o = put(o, (uint64_t)partition); }
        if (data.len) memcpy(o, data.buf, (size_t)data.len);
        o += data.len;
        PyBuffer_Release(&data);
    }
done:
    Py_XDECREF(ids);
    Py_DECREF(datas);
    return out;
}

/* ---------------------------------------------------------------- SEND_RECEIPT */

/* largest receipt frame: 8 (header) + 3 (type, field) + 1 (size) + 57 (receipt body) */
#define RECEIPT_MAX 69

static PyObject *pending_receipts(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    NARGS("pending_receipts", 3)
    uint64_t pid, ledger;
    if (as_u64(args[0], &pid) < 0 || as_u64(args[1], &ledger) < 0) return NULL;
    PyObject *items = PySequence_Fast(args[2], "pending must be a sequence of tuples");
    if (items == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(items);
    PyObject *out = NULL;
    if (n > PY_SSIZE_T_MAX / RECEIPT_MAX) { PyErr_NoMemory(); goto fail; }
    out = PyBytes_FromStringAndSize(NULL, n * RECEIPT_MAX);
    if (out == NULL) goto fail;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(items, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 4) {
            PyErr_SetString(PyExc_TypeError,
                            "a pending receipt is (entry id, sequence id, highest sequence id or None, size)");
            goto fail;
        }
        uint64_t entry, seq, highest = 0;
        PyObject *h = PyTuple_GET_ITEM(t, 2);
        if (as_u64(PyTuple_GET_ITEM(t, 0), &entry) < 0 || as_u64(PyTuple_GET_ITEM(t, 1), &seq) < 0) goto fail;
        if (h != Py_None && as_u64(h, &highest) < 0) goto fail;
        size_t midlen = 2 + vlen(ledger) + vlen(entry);
        size_t size = 2 + vlen(pid) + vlen(seq) + 2 + midlen + (h != Py_None ? 1 + vlen(highest) : 0);
        o = put_u32(o, (uint32_t)(size + 8));
        o = put_u32(o, (uint32_t)(size + 4));
        *o++ = 0x08; *o++ = T_SEND_RECEIPT; *o++ = 0x3A; *o++ = (unsigned char)size;
        *o++ = 0x08; o = put(o, pid);
        *o++ = 0x10; o = put(o, seq);
        *o++ = 0x1A; *o++ = (unsigned char)midlen;
        *o++ = 0x08; o = put(o, ledger);
        *o++ = 0x10; o = put(o, entry);
        if (h != Py_None) { *o++ = 0x20; o = put(o, highest); }
    }
    Py_DECREF(items);
    if (_PyBytes_Resize(&out, (Py_ssize_t)(o - (unsigned char *)PyBytes_AS_STRING(out))) < 0) return NULL;
    return out;
fail:
    Py_XDECREF(out);
    Py_DECREF(items);
    return NULL;
}

/* ---------------------------------------------------------------- ACK */

/* a varint of at most ten bytes ending before `end`, the tenth at most 1: 0, else -1 */
static int rvarint(const unsigned char **pp, const unsigned char *end, uint64_t *out) {
    const unsigned char *p = *pp;
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        if (p >= end) return -1;
        unsigned char b = *p++;
        if (i == 9 && b > 1) return -1;
        v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) { *pp = p; *out = v; return 0; }
    }
    return -1;
}

enum { SHAPE = 0, ACCEPTED = 1, FAILED = -1 };  /* FAILED: a Python exception is set */

/* one MessageIdData in [p, end): ledger (into *ledger), entry appended to `plain` or, with an
 * ack set, (entry, [words]) to `items`. SHAPE when it is not of the common shape. */
static int decode_id(const unsigned char *p, const unsigned char *end, uint64_t *ledger,
                     PyObject *plain, PyObject *items) {
    uint64_t entry = 0, v;
    unsigned seen = 0;
    int result = SHAPE;
    PyObject *words = NULL, *w = NULL;
    while (p < end) {
        unsigned char tag = *p++;
        unsigned bit;
        switch (tag) {
        case 0x08: bit = 1; break;   /* ledgerId */
        case 0x10: bit = 2; break;   /* entryId */
        case 0x18: bit = 4; break;   /* partition (int32, not used) */
        case 0x20: bit = 8; break;   /* batch_index (int32, not used) */
        case 0x28: bit = 0; break;   /* ack_set (repeated int64, unpacked) */
        case 0x30: bit = 16; break;  /* batch_size (int32, not used) */
        default: goto out;
        }
        if ((seen & bit) || rvarint(&p, end, &v) < 0) goto out;
        seen |= bit;
        if (tag == 0x08) *ledger = v;
        else if (tag == 0x10) entry = v;
        else if (tag == 0x28) {
            if (words == NULL && (words = PyList_New(0)) == NULL) { result = FAILED; goto out; }
            w = PyLong_FromLongLong((long long)(int64_t)v);
            if (w == NULL || PyList_Append(words, w) < 0) { result = FAILED; goto out; }
            Py_CLEAR(w);
        }
    }
    if ((seen & 3) != 3) goto out;
    w = PyLong_FromUnsignedLongLong(entry);
    if (w == NULL) { result = FAILED; goto out; }
    if (words == NULL) {
        if (PyList_Append(plain, w) < 0) { result = FAILED; goto out; }
    } else {
        PyObject *pair = PyTuple_Pack(2, w, words);
        if (pair == NULL) { result = FAILED; goto out; }
        int r = PyList_Append(items, pair);
        Py_DECREF(pair);
        if (r < 0) { result = FAILED; goto out; }
    }
    result = ACCEPTED;
out:
    Py_XDECREF(w);
    Py_XDECREF(words);
    return result;
}

static PyObject *id_or_none(int present, uint64_t v) {
    if (present) return PyLong_FromUnsignedLongLong(v);
    Py_RETURN_NONE;
}

/* BaseCommand = [type = ACK][ack = CommandAck] and nothing else; CommandAck holding consumer_id,
 * ack_type (0 or 1), message ids of one ledger and request_id, each scalar at most once. */
static PyObject *decode_ack(PyObject *Py_UNUSED(self), PyObject *arg) {
    Py_buffer raw;
    if (PyObject_GetBuffer(arg, &raw, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *p = raw.buf, *end = p + raw.len;
    PyObject *plain = NULL, *items = NULL, *out = NULL;
    uint64_t cid = 0, type = 0, rid = 0, ledger = 0, first_ledger = 0, v;
    unsigned seen = 0;
    Py_ssize_t nids = 0;
    if (raw.len < 4 || p[0] != 0x08 || p[1] != T_ACK || p[2] != 0x52) goto shape;
    p += 3;
    if (rvarint(&p, end, &v) < 0 || v != (uint64_t)(end - p)) goto shape;
    plain = PyList_New(0);
    items = PyList_New(0);
    if (plain == NULL || items == NULL) goto fail;
    while (p < end) {
        unsigned char tag = *p++;
        if (tag == 0x1A) {  /* message_id */
            if (rvarint(&p, end, &v) < 0 || v > (uint64_t)(end - p)) goto shape;
            int r = decode_id(p, p + v, &ledger, plain, items);
            if (r == FAILED) goto fail;
            if (r == SHAPE || (nids > 0 && ledger != first_ledger)) goto shape;
            first_ledger = ledger;
            nids++;
            p += v;
            continue;
        }
        unsigned bit = tag == 0x08 ? 1 : tag == 0x10 ? 2 : tag == 0x40 ? 4 : 0;
        if (bit == 0 || (seen & bit) || rvarint(&p, end, &v) < 0) goto shape;
        seen |= bit;
        if (bit == 1) cid = v;
        else if (bit == 2) type = v;
        else rid = v;
    }
    if ((seen & 3) != 3 || type > 1) goto shape;
    PyObject *f[4] = {PyLong_FromUnsignedLongLong(cid), PyLong_FromLong((long)type), id_or_none(seen & 4, rid),
                      id_or_none(nids > 0, first_ledger)};
    out = PyTuple_New(6);
    for (int i = 0; i < 4; i++) {  /* each set (NULL too) is owned by `out`; failures decided below */
        if (out != NULL) PyTuple_SET_ITEM(out, i, f[i]);
        else Py_XDECREF(f[i]);
    }
    if (out == NULL || !f[0] || !f[1] || !f[2] || !f[3]) goto fail;
    PyTuple_SET_ITEM(out, 4, plain);
    PyTuple_SET_ITEM(out, 5, items);
    PyBuffer_Release(&raw);
    return out;
shape:
    Py_XDECREF(plain);
    Py_XDECREF(items);
    PyBuffer_Release(&raw);
    Py_RETURN_NONE;
fail:
    if (out != NULL) Py_DECREF(out);  /* owns what was set; plain and items were not yet */
    Py_XDECREF(plain);
    Py_XDECREF(items);
    PyBuffer_Release(&raw);
    return NULL;
}

/* ---------------------------------------------------------------- module */

static PyMethodDef methods[] = {
    {"message_frame", (PyCFunction)(void (*)(void))message_frame, METH_FASTCALL,
     "message_frame(consumer_id, ledger_id, entry_id, partition, redelivery_count, ack_set, data) -> bytes"},
    {"message_frames", (PyCFunction)(void (*)(void))message_frames, METH_FASTCALL,
     "message_frames(consumer_id, ledger_id, partition, entry_ids, datas) -> bytes"},
    {"pending_receipts", (PyCFunction)(void (*)(void))pending_receipts, METH_FASTCALL,
     "pending_receipts(producer_id, ledger_id, pending) -> bytes"},
    {"decode_ack", decode_ack, METH_O,
     "decode_ack(raw) -> (consumer_id, ack_type, request_id, ledger_id, plain, items) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "letterbox.protocol._consumer_codec", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__consumer_codec(void) { return PyModule_Create(&module); }
