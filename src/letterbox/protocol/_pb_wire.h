/* proto2 wire-format scanning for _send_codec.c: varints, tags, length-delimited fields and
 * the KeyValue message, each answering FALLBACK whenever protobuf might read the bytes
 * differently (or refuse them). Pure functions; every read bounds-checked against `end`. */
#ifndef LETTERBOX_PB_WIRE_H
#define LETTERBOX_PB_WIRE_H
#include <stddef.h>
#include <stdint.h>

typedef const uint8_t *ptr;
#define FALLBACK (-1)

/* A varint of at most ten bytes whose value fits 64 bits, in its shortest encoding; FALLBACK
 * otherwise (cut off, longer, padded, or a tenth byte above 1: protobuf would refuse it or we
 * are not sure how it reads it). */
static int varint(ptr *pp, ptr end, uint64_t *out) {
    ptr p = *pp;
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        if (p >= end) return FALLBACK;
        uint8_t b = *p++;
        if ((i == 9 && b > 1) || (i > 0 && b == 0)) return FALLBACK;
        v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *pp = p;
            *out = v;
            return 0;
        }
    }
    return FALLBACK;
}

/* A field tag of one or two bytes (fields 1..2047); FALLBACK otherwise. */
static int tag_of(ptr *pp, ptr end, uint64_t *tag) {
    ptr p = *pp;
    if (p < end && p[0] < 0x80) {
        *tag = p[0];
        *pp = p + 1;
        return 0;
    }
    if (end - p >= 2 && p[1] > 0 && p[1] < 0x80) {
        *tag = (p[0] & 0x7Fu) | (uint64_t)p[1] << 7;
        *pp = p + 2;
        return 0;
    }
    return FALLBACK;
}

/* A length-delimited field's body: [*body, *body + *len) inside `end`, *pp moved past it. */
static int delimited(ptr *pp, ptr end, ptr *body, size_t *len) {
    uint64_t n;
    if (varint(pp, end, &n) || n > (uint64_t)(end - *pp)) return FALLBACK;
    *body = *pp;
    *len = (size_t)n;
    *pp += n;
    return 0;
}

/* KeyValue {required string key = 1; required string value = 2;} and nothing else. */
static int key_value(ptr p, ptr end) {
    int seen = 0;
    while (p < end) {
        uint64_t tag;
        ptr body;
        size_t len;
        if (tag_of(&p, end, &tag) || (tag != 0x0A && tag != 0x12) || delimited(&p, end, &body, &len))
            return FALLBACK;
        seen |= tag == 0x0A ? 1 : 2;
    }
    return seen == 3 ? 0 : FALLBACK;
}

enum { BYTES_FIELD, KV_FIELD, VARINT_FIELD };

/* Wire kind of the fields accepted from a message; -1: not accepted (fall back). */
static int field_kind(const int8_t *kinds, size_t nkinds, uint64_t tag) {
    uint64_t field = tag >> 3;
    if (field >= nkinds || kinds[field] < 0) return -1;
    int wire = (int)(tag & 7);
    int kind = kinds[field];
    return wire == (kind == VARINT_FIELD ? 0 : 2) ? kind : -1;
}

/* The next field of a message whose accepted fields are `kinds`: its number in *field and, for
 * a varint, its value in *v (0 otherwise); a KeyValue's body is checked too. FALLBACK when the
 * field is not accepted or not well formed. */
static int next_field(ptr *pp, ptr end, const int8_t *kinds, size_t nkinds, uint64_t *field,
                      uint64_t *v) {
    uint64_t tag;
    ptr body;
    size_t len;
    *v = 0;
    if (tag_of(pp, end, &tag)) return FALLBACK;
    int kind = field_kind(kinds, nkinds, tag);
    if (kind < 0) return FALLBACK;
    if (kind != VARINT_FIELD) {
        if (delimited(pp, end, &body, &len)) return FALLBACK;
        if (kind == KV_FIELD && key_value(body, body + len)) return FALLBACK;
    } else if (varint(pp, end, v)) {
        return FALLBACK;
    }
    *field = tag >> 3;
    return 0;
}

#endif
