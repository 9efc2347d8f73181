/* letterbox.protocol._send_codec -- the SEND ingress path in C (issue 13); its pure-Python
 * reference with the same contract is protocol/send_scan.py, and tests/protocol compares the two.
 *
 * decode_send(buf, start, cmd_end, end) reads one SEND frame whose BaseCommand is buf[start:cmd_end]
 * and whose headers_and_payload is buf[cmd_end:end]:
 *   None  -- the command is not of the common SEND shape (send_decoder.py) or there is no payload:
 *            the caller takes the Python/protobuf path for the whole frame;
 *   (producer_id, sequence_id, num_messages | None, highest_sequence_id | None, command bytes,
 *    headers_and_payload bytes, facts | None), facts = (message count, publish_time,
 *    deliver_at_time | None, payload length) when this SEND is SURELY what the Python path would
 *    accept with those values for any max_message_size >= the payload length: a verified CRC32C
 *    (or none), no broker entry metadata, a MessageMetadata that protobuf parses (required fields
 *    present, known fields only with their wire types, nested KeyValues complete) holding no
 *    compression, encryption, chunk, marker or transaction field, counts that agree, and an
 *    uncompressed batch whose entries walk exactly as batch.count_batch_entries walks them.
 *    Anything else gives facts None and the Python path decides (same errors as before).
 * Invariants: every read is bounds-checked against `end` (hostile bytes); nothing raises for
 * bad input; no static mutable state; the bytes returned are copies made as they came. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_crc32c.h"
#include "_pb_wire.h"

static uint32_t be32(ptr p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

/* MessageMetadata fields taken: strings/bytes 1 5 6 7 16 18 26, properties 4, varints 2 3 8
 * (0 only) 9 11 12 17 19 24 25 30. Refused: 13-15 encryption, 20 marker, 22-23 transaction,
 * 27-29 chunks, anything unknown. */
static const int8_t META_KINDS[31] = {
    -1, BYTES_FIELD, VARINT_FIELD, VARINT_FIELD, KV_FIELD, BYTES_FIELD, BYTES_FIELD, BYTES_FIELD,
    VARINT_FIELD, VARINT_FIELD, -1, VARINT_FIELD, VARINT_FIELD, -1, -1, -1,
    BYTES_FIELD, VARINT_FIELD, BYTES_FIELD, VARINT_FIELD, -1, -1, -1, -1,
    VARINT_FIELD, VARINT_FIELD, BYTES_FIELD, -1, -1, -1, VARINT_FIELD,
};

typedef struct {
    uint64_t publish_time, deliver_at, uncompressed;
    int64_t in_batch;
    int has_deliver, has_batch, has_uncompressed;
} Meta;

static int scan_metadata(ptr p, ptr end, Meta *m) {
    int required = 0;
    memset(m, 0, sizeof *m);
    while (p < end) {
        uint64_t field, v;
        if (next_field(&p, end, META_KINDS, sizeof META_KINDS, &field, &v)) return FALLBACK;
        switch (field) {
        case 1: required |= 1; break;
        case 2: required |= 2; break;
        case 3: required |= 4; m->publish_time = v; break;
        case 8: if (v != 0) return FALLBACK; break;  /* compressed: the Python path expands it */
        case 9:
            if (v > UINT32_MAX) return FALLBACK;
            m->uncompressed = v;
            m->has_uncompressed = 1;
            break;
        case 11:
            if (v > INT32_MAX) return FALLBACK;
            m->in_batch = (int64_t)v;
            m->has_batch = 1;
            break;
        case 19:
            if (v > INT64_MAX) return FALLBACK;
            m->deliver_at = v;
            m->has_deliver = 1;
            break;
        default: break;
        }
    }
    return required == 7 ? 0 : FALLBACK;
}

/* SingleMessageMetadata: properties 1, strings/bytes 2 7, varints 3 (payload_size) 4 5 6 8 9 10. */
static const int8_t SINGLE_KINDS[11] = {
    -1, KV_FIELD, BYTES_FIELD, VARINT_FIELD, VARINT_FIELD, VARINT_FIELD, VARINT_FIELD, BYTES_FIELD,
    VARINT_FIELD, VARINT_FIELD, VARINT_FIELD,
};

/* The entry's payload_size (>= 0), or FALLBACK. */
static int64_t scan_single(ptr p, ptr end) {
    int64_t size = -1;
    while (p < end) {
        uint64_t field, v;
        if (next_field(&p, end, SINGLE_KINDS, sizeof SINGLE_KINDS, &field, &v)) return FALLBACK;
        if (field == 3) {
            if (v > INT32_MAX) return FALLBACK;
            size = (int64_t)v;
        }
    }
    return size;
}

/* Exactly `count` entries [u32 size][SingleMessageMetadata][payload_size bytes] fill [p, end). */
static int walk_batch(ptr p, ptr end, int64_t count) {
    for (int64_t i = 0; i < count; i++) {
        if (end - p < 4) return FALLBACK;
        uint32_t size = be32(p);
        p += 4;
        if (size > (size_t)(end - p)) return FALLBACK;
        int64_t body = scan_single(p, p + size);
        p += size;
        if (body < 0 || body > end - p) return FALLBACK;
        p += body;
    }
    return p == end ? 0 : FALLBACK;
}

/* The message count when headers_and_payload [p, end) is surely accepted (see the header). */
static int64_t check_payload(ptr p, ptr end, int64_t num_messages, Meta *m, size_t *payload_len,
                             int allow_hw) {
    if (end - p >= 2 && p[0] == 0x0E && p[1] == 0x01) {
        if (end - p < 6) return FALLBACK;
        uint32_t expected = be32(p + 2);
        p += 6;
        if (crc32c(p, (size_t)(end - p), allow_hw) != expected) return FALLBACK;
    } else if (end - p >= 2 && p[0] == 0x0E && p[1] == 0x02) {
        return FALLBACK;  /* broker entry metadata */
    }
    if (end - p < 4) return FALLBACK;
    uint32_t size = be32(p);
    p += 4;
    if (size > (size_t)(end - p) || scan_metadata(p, p + size, m)) return FALLBACK;
    p += size;
    *payload_len = (size_t)(end - p);
    if (m->has_uncompressed && m->uncompressed > *payload_len) return FALLBACK;
    if (!m->has_batch) return num_messages < 0 || num_messages == 1 ? 1 : FALLBACK;
    if (m->in_batch < 1 || (num_messages >= 0 && num_messages != m->in_batch)) return FALLBACK;
    return walk_batch(p, end, m->in_batch) ? FALLBACK : m->in_batch;
}

/* ------------------------------------------------------------------ the SEND command */

typedef struct {
    uint64_t producer_id, sequence_id, num_messages, highest;
    int has_num, has_highest;
} Send;

/* BaseCommand = [type = SEND][send = CommandSend{producer_id, sequence_id, num_messages
 * (0..2^31-1), highest_sequence_id}] and nothing else, as send_decoder.decode_send_command. */
static int decode_command(ptr p, ptr end, Send *s) {
    uint64_t size, tag, v;
    memset(s, 0, sizeof *s);
    if (end - p < 5 || p[0] != 0x08 || p[1] != 0x06 || p[2] != 0x32) return FALLBACK;
    p += 3;
    if (varint(&p, end, &size) || size != (uint64_t)(end - p)) return FALLBACK;
    while (p < end) {
        if (tag_of(&p, end, &tag) || varint(&p, end, &v)) return FALLBACK;
        switch (tag) {
        case 0x08: s->producer_id = v; break;
        case 0x10: s->sequence_id = v; break;
        case 0x18:
            if (v > INT32_MAX) return FALLBACK;
            s->num_messages = v;
            s->has_num = 1;
            break;
        case 0x30: s->highest = v; s->has_highest = 1; break;
        default: return FALLBACK;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ Python functions */

static PyObject *optional_u64(int has, uint64_t v) {
    if (!has) Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(v);
}

/* A tuple of n new references (each may be NULL: then it fails, releasing the others). */
static PyObject *tuple_of(Py_ssize_t n, PyObject **items) {
    PyObject *t = NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        if (items[i] == NULL) goto fail;
    if ((t = PyTuple_New(n)) == NULL) goto fail;
    for (Py_ssize_t i = 0; i < n; i++) PyTuple_SET_ITEM(t, i, items[i]);
    return t;
fail:
    for (Py_ssize_t i = 0; i < n; i++) Py_XDECREF(items[i]);
    return NULL;
}

static PyObject *facts_of(int64_t count, Meta *m, size_t payload_len) {
    PyObject *items[4] = {
        PyLong_FromLongLong(count), PyLong_FromUnsignedLongLong(m->publish_time),
        m->has_deliver ? PyLong_FromUnsignedLongLong(m->deliver_at) : Py_NewRef(Py_None),
        PyLong_FromSize_t(payload_len),
    };
    return tuple_of(4, items);
}

static PyObject *decode_send_impl(ptr base, Py_ssize_t start, Py_ssize_t cmd_end, Py_ssize_t end,
                                  int allow_hw) {
    Send s;
    Meta m;
    size_t payload_len = 0;
    if (cmd_end == end || decode_command(base + start, base + cmd_end, &s)) Py_RETURN_NONE;
    int64_t count = check_payload(base + cmd_end, base + end, s.has_num ? (int64_t)s.num_messages : -1,
                                  &m, &payload_len, allow_hw);
    PyObject *items[7] = {
        PyLong_FromUnsignedLongLong(s.producer_id), PyLong_FromUnsignedLongLong(s.sequence_id),
        optional_u64(s.has_num, s.num_messages), optional_u64(s.has_highest, s.highest),
        PyBytes_FromStringAndSize((const char *)base + start, cmd_end - start),
        PyBytes_FromStringAndSize((const char *)base + cmd_end, end - cmd_end),
        count < 0 ? Py_NewRef(Py_None) : facts_of(count, &m, payload_len),
    };
    return tuple_of(7, items);
}

static int index_arg(PyObject *o, Py_ssize_t *out) {
    *out = PyLong_AsSsize_t(o);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static PyObject *decode_send(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t start, cmd_end, end;
    Py_buffer view;
    int allow_hw = 1;
    if (nargs != 4 && nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "decode_send(buf, start, cmd_end, end[, hardware_crc])");
        return NULL;
    }
    if (index_arg(args[1], &start) || index_arg(args[2], &cmd_end) || index_arg(args[3], &end))
        return NULL;
    if (nargs == 5 && (allow_hw = PyObject_IsTrue(args[4])) < 0) return NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = NULL;
    if (start < 0 || start > cmd_end || cmd_end > end || end > view.len)
        PyErr_SetString(PyExc_ValueError, "decode_send: need 0 <= start <= cmd_end <= end <= len(buf)");
    else
        result = decode_send_impl((ptr)view.buf, start, cmd_end, end, allow_hw);
    PyBuffer_Release(&view);
    return result;
}

/* The run of complete SEND frames of the common shape (with a payload) from `pos` on, each as
 * decode_send's tuple, and the position after them. It stops at the first frame that is
 * incomplete, out of size bounds, or anything else: the Python decoder reads that one. */
static PyObject *split_sends(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t pos, max_frame;
    Py_buffer view;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "split_sends(buf, pos, max_frame)");
        return NULL;
    }
    if (index_arg(args[1], &pos) || index_arg(args[2], &max_frame)) return NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *items = NULL, *result = NULL;
    ptr base = (ptr)view.buf;
    if (pos < 0 || pos > view.len) {
        PyErr_SetString(PyExc_ValueError, "split_sends: need 0 <= pos <= len(buf)");
        goto done;
    }
    if ((items = PyList_New(0)) == NULL) goto done;
    while (view.len - pos >= 8) {
        uint32_t total = be32(base + pos), cmd_size = be32(base + pos + 4);
        if (total > (uint64_t)max_frame || total < 4 || total > (uint64_t)(view.len - pos - 4) ||
            cmd_size > total - 4 || cmd_size <= 3 || base[pos + 8] != 0x08 || base[pos + 9] != 0x06)
            break;
        Py_ssize_t start = pos + 8, end = pos + 4 + (Py_ssize_t)total;
        PyObject *item = decode_send_impl(base, start, start + (Py_ssize_t)cmd_size, end, 1);
        if (item == NULL) goto done;
        if (item == Py_None) {
            Py_DECREF(item);
            break;
        }
        int failed = PyList_Append(items, item);
        Py_DECREF(item);
        if (failed) goto done;
        pos = end;
    }
    result = Py_BuildValue("(On)", items, pos);
done:
    Py_XDECREF(items);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *crc32c_py(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer view;
    int allow_hw = 1;
    if (nargs != 1 && nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "crc32c(data[, hardware])");
        return NULL;
    }
    if (nargs == 2 && (allow_hw = PyObject_IsTrue(args[1])) < 0) return NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    uint32_t crc = crc32c((ptr)view.buf, (size_t)view.len, allow_hw);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

static PyMethodDef methods[] = {
    {"decode_send", (PyCFunction)(void (*)(void))decode_send, METH_FASTCALL,
     "One SEND frame: None, or its fields, bytes and checked facts (see the module header)."},
    {"split_sends", (PyCFunction)(void (*)(void))split_sends, METH_FASTCALL,
     "The run of common SEND frames at `pos`: (list of decode_send tuples, position after them)."},
    {"crc32c", (PyCFunction)(void (*)(void))crc32c_py, METH_FASTCALL,
     "CRC32C of a buffer (hardware=False forces the table)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "letterbox.protocol._send_codec", NULL, 0, methods,
};

PyMODINIT_FUNC PyInit__send_codec(void) { return PyModule_Create(&module); }
