/* eosim.analysis._jsonl_scan: an optional accelerator of eosim.analysis.jsonl_reader, which
 * works the same without it (more slowly). One pass over a JSON Lines history cuts the send
 * lines of eosim's one fixed shape (jsonl_reader.SEND_LINE, which this scanner accepts
 * exactly) into columns; their strings stay byte ranges of the file until asked for.
 *
 * scan(raw, no_partition, no_offset)
 *     -> (ints, times, capacity, sends, others, processes, topics)
 *   ints       bytearray: SEND_COLUMNS blocks of `capacity` int64s, a column each, of which
 *              the first `sends` items are the send lines' in file order: row, id, type code
 *              (invoke, ok, fail, info), partition (no_partition for null), has_offset,
 *              offset (no_offset for null), offset_null, process code, topic code, and the
 *              key, value and error as byte ranges (start, size; a size of -1 for a null key
 *              or no error)
 *   times      bytearray: `capacity` float64s, of which the first `sends` are the send
 *              lines' times, as Python's float() reads them
 *   others     bytearray: int64 (row, start, stop) of every other line, stop before its
 *              newline
 *   processes, topics: the distinct values (str), indexed by the codes
 * log_records(raw, start, stop) -> (ints, values, capacity, end) or None: the records array
 *   that opens at raw[start] (`[`) and closes at raw[end] (`]`, before `stop`) in
 *   jsonl_reader.LOG_RECORDS's shape, as four blocks of `capacity` int64s (offset,
 *   producer_id, epoch, sequence) and a list of the values (str); None when it is not in
 *   that shape, or a value is not valid UTF-8, is "records" or holds "}]" (so that the
 *   array ends at the first "}]" after its `[` and holds no "records" key's text)
 * texts(raw, starts, sizes) -> list: the byte ranges as str, None where the size is < 0
 * equal(raw, a_starts, a_sizes, b_starts, b_sizes) -> bool: each range a[i] holds the same
 *   bytes as b[i]
 *
 * A line is a send line when it has exactly SEND_LINE's shape and its strings are valid
 * UTF-8; every other line (a send line in any other shape too) is left to the caller. Lines
 * end at each newline; a last line without one counts too. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

typedef struct {
    const unsigned char *p;
    const unsigned char *end; /* the line's end: its newline, or the end of the data */
} Cursor;

typedef struct {
    const unsigned char *start;
    Py_ssize_t size;
    int high; /* a byte >= 0x80: decode as UTF-8 */
} Span;

static int
literal(Cursor *c, const char *text, size_t size)
{
    if ((size_t)(c->end - c->p) < size || memcmp(c->p, text, size) != 0) {
        return 0;
    }
    c->p += size;
    return 1;
}

#define LITERAL(c, text) literal((c), (text), sizeof(text) - 1)

/* A JSON string without escapes or control characters: `"[^"\\\x00-\x1f]*"`. */
static int
string(Cursor *c, Span *span)
{
    const unsigned char *q, *end = c->end;
    int high = 0;
    if (c->p >= end || *c->p != '"') {
        return 0;
    }
    q = c->p + 1;
    span->start = q;
    while (q < end) {
        unsigned char b = *q;
        if (b == '"') {
            break;
        }
        if (b == '\\' || b < 0x20) {
            return 0;
        }
        high |= b & 0x80;
        q++;
    }
    if (q >= end) {
        return 0;
    }
    span->size = q - span->start;
    span->high = high;
    c->p = q + 1;
    return 1;
}

/* A number's sign (a minus only when `negative`) and first digit: the first digit's place, or
 * NULL when there is none. */
static const unsigned char *
signed_digit(const unsigned char *p, const unsigned char *end, int negative, int *minus)
{
    *minus = negative && p < end && *p == '-';
    p += *minus;
    return p < end && *p >= '0' && *p <= '9' ? p : NULL;
}

/* `-?(?:0|[1-9][0-9]{0,17})` (the minus only when `negative`): fits an int64. */
static int
integer(Cursor *c, int negative, long long *out)
{
    const unsigned char *p, *end = c->end;
    long long value = 0;
    int minus, digits = 0;
    p = signed_digit(c->p, end, negative, &minus);
    if (p == NULL) {
        return 0;
    }
    if (*p == '0') {
        p++;
    }
    else {
        while (p < end && *p >= '0' && *p <= '9' && digits < 18) {
            value = value * 10 + (*p - '0');
            p++;
            digits++;
        }
    }
    *out = minus ? -value : value;
    c->p = p;
    return 1;
}

/* The powers of ten a double holds exactly. */
static const double EXACT_TENS[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                    1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                    1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* A JSON number (`-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?`), read as Python's
 * float() reads it (correctly rounded). Returns 0 when the text is not such a number, -1 on
 * a Python error.
 *
 * With at most 15 digits and a decimal exponent of at most 22 either way, the digits as an
 * integer and the power of ten are both exact doubles, so one multiplication or division,
 * rounded once, gives the correctly rounded value (Clinger's fast path); any other number
 * goes to Python's own conversion, PyOS_string_to_double. */
static int
number(Cursor *c, double *out)
{
    const unsigned char *p, *end = c->end;
    char *stop = NULL;
    long long digits = 0, exponent = 0;
    int count = 0, minus, scale = 0, exponent_minus = 0, exponent_digits = 0;
    p = signed_digit(c->p, end, 1, &minus);
    if (p == NULL) {
        return 0;
    }
    if (*p == '0') {
        p++;
    }
    else {
        while (p < end && *p >= '0' && *p <= '9') {
            if (count < 16) {
                digits = digits * 10 + (*p - '0');
            }
            count++;
            p++;
        }
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9') {
            return 0;
        }
        while (p < end && *p >= '0' && *p <= '9') {
            if (count < 16) {
                digits = digits * 10 + (*p - '0');
            }
            count++;
            scale++;
            p++;
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '-' || *p == '+')) {
            exponent_minus = *p == '-';
            p++;
        }
        if (p >= end || *p < '0' || *p > '9') {
            return 0;
        }
        while (p < end && *p >= '0' && *p <= '9') {
            if (exponent_digits < 6) {
                exponent = exponent * 10 + (*p - '0');
            }
            exponent_digits++;
            p++;
        }
    }
    exponent = (exponent_minus ? -exponent : exponent) - scale;
    if (count <= 15 && exponent_digits <= 5 && exponent >= -22 && exponent <= 22) {
        double value = (double)digits;
        value = exponent < 0 ? value / EXACT_TENS[-exponent] : value * EXACT_TENS[exponent];
        *out = minus ? -value : value;
        c->p = p;
        return 1;
    }
    /* The number is followed by a `,` (the line goes on), so the conversion stops there. */
    *out = PyOS_string_to_double((const char *)c->p, &stop, NULL);
    if (*out == -1.0 && PyErr_Occurred()) {
        return -1;
    }
    if ((const unsigned char *)stop != p) {
        return 0;
    }
    c->p = p;
    return 1;
}

enum { SEND_COLUMNS = 15, CACHED = 16 };

typedef struct {
    long long id, type, partition, has_offset, offset, offset_null;
    double time;
    Span process, topic, key, value, error;
    int keyed, errored;
} SendLine;

/* The line at c->p as a send line: 1 (c->p then at its newline or the end), or 0 when it is
 * not one, -1 on a Python error. No part of the shape can hold a newline (a string holds no
 * control character), so the line's end need not be known beforehand. */
static int
send_line(Cursor *c, SendLine *line, long long no_partition, long long no_offset)
{
    int read;
    if (!LITERAL(c, "{\"kind\":\"op\",\"id\":") || !integer(c, 1, &line->id)
        || !LITERAL(c, ",\"type\":\"")) {
        return 0;
    }
    if (LITERAL(c, "invoke\"")) {
        line->type = 0;
    }
    else if (LITERAL(c, "ok\"")) {
        line->type = 1;
    }
    else if (LITERAL(c, "fail\"")) {
        line->type = 2;
    }
    else if (LITERAL(c, "info\"")) {
        line->type = 3;
    }
    else {
        return 0;
    }
    if (!LITERAL(c, ",\"f\":\"send\",\"process\":") || !string(c, &line->process)
        || line->process.size == 0 || !LITERAL(c, ",\"time\":")) {
        return 0;
    }
    read = number(c, &line->time);
    if (read <= 0) {
        return read;
    }
    if (!LITERAL(c, ",\"value\":{\"topic\":") || !string(c, &line->topic)
        || !LITERAL(c, ",\"partition\":")) {
        return 0;
    }
    if (LITERAL(c, "null")) {
        line->partition = no_partition;
    }
    else if (!integer(c, 0, &line->partition)) {
        return 0;
    }
    if (!LITERAL(c, ",\"key\":")) {
        return 0;
    }
    line->keyed = !LITERAL(c, "null");
    if (line->keyed && !string(c, &line->key)) {
        return 0;
    }
    if (!LITERAL(c, ",\"value\":") || !string(c, &line->value)) {
        return 0;
    }
    line->has_offset = LITERAL(c, ",\"offset\":");
    line->offset = no_offset;
    line->offset_null = 0;
    if (line->has_offset) {
        if (LITERAL(c, "null")) {
            line->offset_null = 1;
        }
        else if (LITERAL(c, "-1")) {
            line->offset = -1;
        }
        else if (!integer(c, 0, &line->offset)) {
            return 0;
        }
    }
    if (!LITERAL(c, "}")) {
        return 0;
    }
    line->errored = LITERAL(c, ",\"error\":");
    if (line->errored && !string(c, &line->error)) {
        return 0;
    }
    return LITERAL(c, "}") && (c->p == c->end || *c->p == '\n');
}

/* A str of `size` bytes; NULL with no exception set when they are not valid UTF-8. */
static PyObject *
text(const unsigned char *start, Py_ssize_t size, int high)
{
    PyObject *result;
    if (!high) {
        result = PyUnicode_New(size, 127);
        if (result != NULL) {
            memcpy(PyUnicode_DATA(result), start, size);
        }
        return result;
    }
    result = PyUnicode_DecodeUTF8((const char *)start, size, "strict");
    if (result == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
    }
    return result;
}

/* 1 when the span is valid UTF-8, 0 when not, -1 on a Python error. */
static int
valid(const Span *span)
{
    PyObject *decoded;
    if (!span->high) {
        return 1;
    }
    decoded = text(span->start, span->size, 1);
    if (decoded == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    Py_DECREF(decoded);
    return 1;
}

/* Codes for distinct strings: the last few seen by their bytes, then a dict by value. */
typedef struct {
    const unsigned char *start[CACHED];
    Py_ssize_t size[CACHED];
    long long code[CACHED];
    int count, next;
    PyObject *codes;    /* str -> int */
    PyObject *distinct; /* list of str, by code */
} Codes;

/* The span's code (>= 0); -2 when it is not valid UTF-8, -1 on a Python error. */
static long long
code_of(Codes *codes, const Span *span)
{
    PyObject *value, *known, *number;
    long long code;
    int i;
    for (i = 0; i < codes->count; i++) {
        if (codes->size[i] == span->size
            && memcmp(codes->start[i], span->start, span->size) == 0) {
            return codes->code[i];
        }
    }
    value = text(span->start, span->size, span->high);
    if (value == NULL) {
        return PyErr_Occurred() ? -1 : -2;
    }
    known = PyDict_GetItemWithError(codes->codes, value); /* borrowed */
    if (known != NULL) {
        code = PyLong_AsLongLong(known);
    }
    else if (PyErr_Occurred()) {
        code = -1;
    }
    else {
        code = PyList_GET_SIZE(codes->distinct);
        number = PyLong_FromLongLong(code);
        if (number == NULL || PyDict_SetItem(codes->codes, value, number) < 0
            || PyList_Append(codes->distinct, value) < 0) {
            code = -1;
        }
        Py_XDECREF(number);
    }
    Py_DECREF(value);
    if (code >= 0) {
        i = codes->count < CACHED ? codes->count++ : codes->next++ % CACHED;
        codes->start[i] = span->start;
        codes->size[i] = span->size;
        codes->code[i] = code;
    }
    return code;
}

/* A growing array of fixed-size items in a bytearray, handed over at its size. */
typedef struct {
    PyObject *items; /* bytearray */
    Py_ssize_t size; /* in bytes */
} Column;

/* Room for `bytes` more: a pointer to it, or NULL with an exception set. */
static void *
grow(Column *column, Py_ssize_t bytes)
{
    Py_ssize_t capacity = PyByteArray_GET_SIZE(column->items);
    if (column->size + bytes > capacity
        && PyByteArray_Resize(column->items, 2 * capacity + bytes) < 0) {
        return NULL;
    }
    column->size += bytes;
    return PyByteArray_AS_STRING(column->items) + column->size - bytes;
}

/* A column with room for `bytes`, or 0 with an exception set. */
static int
column(Column *column, Py_ssize_t bytes)
{
    column->size = 0;
    column->items = PyByteArray_FromStringAndSize(NULL, bytes);
    return column->items != NULL;
}

static int
handed_over(Column *column)
{
    return PyByteArray_Resize(column->items, column->size) == 0;
}

/* The send lines' columns: SEND_COLUMNS blocks of `capacity` int64s each, then the times. */
typedef struct {
    PyObject *ints, *times; /* bytearrays */
    Py_ssize_t count, capacity;
} Sends;

/* The line's columns appended: 1, 0 when a string is not valid UTF-8 (nothing appended),
 * -1 on a Python error. */
static int
append(Sends *sends, const SendLine *line, Py_ssize_t row, const unsigned char *data,
       Codes *processes, Codes *topics)
{
    long long process, topic, *out;
    Py_ssize_t at = sends->count, step = sends->capacity;
    int checked = 1;
    process = code_of(processes, &line->process);
    topic = process >= 0 ? code_of(topics, &line->topic) : process;
    if (topic < 0) {
        return topic == -1 ? -1 : 0;
    }
    if (line->keyed) {
        checked = valid(&line->key);
    }
    if (checked == 1) {
        checked = valid(&line->value);
    }
    if (checked == 1 && line->errored) {
        checked = valid(&line->error);
    }
    if (checked != 1) {
        return checked;
    }
    if (at >= sends->capacity) { /* cannot happen: see SHORTEST */
        PyErr_SetString(PyExc_RuntimeError, "more send lines than the columns can hold");
        return -1;
    }
    ((double *)PyByteArray_AS_STRING(sends->times))[at] = line->time;
    out = (long long *)PyByteArray_AS_STRING(sends->ints) + at;
    out[0] = row;
    out[step] = line->id;
    out[2 * step] = line->type;
    out[3 * step] = line->partition;
    out[4 * step] = line->has_offset;
    out[5 * step] = line->offset;
    out[6 * step] = line->offset_null;
    out[7 * step] = process;
    out[8 * step] = topic;
    out[9 * step] = line->keyed ? line->key.start - data : 0;
    out[10 * step] = line->keyed ? line->key.size : -1;
    out[11 * step] = line->value.start - data;
    out[12 * step] = line->value.size;
    out[13 * step] = line->errored ? line->error.start - data : 0;
    out[14 * step] = line->errored ? line->error.size : -1;
    sends->count++;
    return 1;
}

/* The shortest send line, with its newline (the string's NUL): a file of `n` bytes holds at
 * most n / SHORTEST + 1 send lines, the columns' capacity. */
enum { SHORTEST = sizeof("{\"kind\":\"op\",\"id\":0,\"type\":\"ok\",\"f\":\"send\",\"process\":\"p\","
                         "\"time\":0,\"value\":{\"topic\":\"\",\"partition\":0,\"key\":\"\","
                         "\"value\":\"\"}}") };

static PyObject *
scan(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer raw;
    long long no_partition, no_offset;
    const unsigned char *data, *p, *end, *newline;
    Sends sends = {0};
    Column others = {0};
    Codes processes = {0}, topics = {0};
    PyObject *result = NULL;
    Py_ssize_t row = 0;

    if (!PyArg_ParseTuple(args, "y*LL", &raw, &no_partition, &no_offset)) {
        return NULL;
    }
    data = (const unsigned char *)raw.buf;
    end = data + raw.len;
    sends.capacity = raw.len / SHORTEST + 1;
    sends.ints = PyByteArray_FromStringAndSize(NULL, SEND_COLUMNS * sends.capacity * 8);
    sends.times = PyByteArray_FromStringAndSize(NULL, sends.capacity * 8);
    processes.codes = PyDict_New();
    processes.distinct = PyList_New(0);
    topics.codes = PyDict_New();
    topics.distinct = PyList_New(0);
    if (!sends.ints || !sends.times || !processes.codes || !processes.distinct || !topics.codes
        || !topics.distinct || !column(&others, 64 * 3 * sizeof(long long))) {
        goto done;
    }
    for (p = data; p < end; row++) {
        SendLine line;
        Cursor cursor;
        int matched;
        cursor.p = p;
        cursor.end = end;
        matched = send_line(&cursor, &line, no_partition, no_offset);
        if (matched == 1) {
            matched = append(&sends, &line, row, data, &processes, &topics);
        }
        if (matched < 0) {
            goto done;
        }
        if (matched == 1) {
            newline = cursor.p < end ? cursor.p : NULL;
        }
        else {
            long long *out = grow(&others, 3 * sizeof(long long));
            if (out == NULL) {
                goto done;
            }
            newline = memchr(p, '\n', end - p);
            out[0] = row;
            out[1] = p - data;
            out[2] = (newline ? newline : end) - data;
        }
        p = newline ? newline + 1 : end;
    }
    if (handed_over(&others)) {
        result = Py_BuildValue("OOnnOOO", sends.ints, sends.times, sends.capacity, sends.count,
                               others.items, processes.distinct, topics.distinct);
    }
done:
    Py_XDECREF(sends.ints);
    Py_XDECREF(sends.times);
    Py_XDECREF(others.items);
    Py_XDECREF(processes.codes);
    Py_XDECREF(processes.distinct);
    Py_XDECREF(topics.codes);
    Py_XDECREF(topics.distinct);
    PyBuffer_Release(&raw);
    return result;
}

/* The shortest record of a records array, with the comma after it. */
enum { SHORTEST_RECORD = sizeof("{\"offset\":0,\"value\":\"\",\"producer_id\":0,\"epoch\":0,"
                                "\"sequence\":0}") };

/* One record of jsonl_reader.LOG_RECORDS: 1, 0 when not, -1 on a Python error. */
static int
log_record(Cursor *c, long long *out, Py_ssize_t step, PyObject *values)
{
    Span value;
    PyObject *item;
    Py_ssize_t i;
    int appended;
    if (!LITERAL(c, "{\"offset\":") || !integer(c, 0, out)
        || !LITERAL(c, ",\"value\":") || !string(c, &value)
        || !LITERAL(c, ",\"producer_id\":") || !integer(c, 1, out + step)
        || !LITERAL(c, ",\"epoch\":") || !integer(c, 1, out + 2 * step)
        || !LITERAL(c, ",\"sequence\":") || !integer(c, 1, out + 3 * step)
        || !LITERAL(c, "}")) {
        return 0;
    }
    if (value.size == 7 && memcmp(value.start, "records", 7) == 0) {
        return 0; /* the line's "records" would not be its only one */
    }
    for (i = 1; i < value.size; i++) {
        if (value.start[i] == ']' && value.start[i - 1] == '}') {
            return 0; /* the first `}]` after the `[` would not end the array */
        }
    }
    item = text(value.start, value.size, value.high);
    if (item == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    appended = PyList_Append(values, item);
    Py_DECREF(item);
    return appended < 0 ? -1 : 1;
}

static PyObject *
log_records(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer raw;
    Py_ssize_t start, stop, capacity, count = 0;
    PyObject *ints = NULL, *values = NULL, *result = NULL;
    Cursor c;
    int read = 0;

    if (!PyArg_ParseTuple(args, "y*nn", &raw, &start, &stop)) {
        return NULL;
    }
    if (start < 0 || stop < start || stop > raw.len) {
        PyErr_SetString(PyExc_ValueError, "a byte range outside the data");
        goto done;
    }
    c.p = (const unsigned char *)raw.buf + start;
    c.end = (const unsigned char *)raw.buf + stop;
    capacity = (stop - start) / SHORTEST_RECORD + 1;
    ints = PyByteArray_FromStringAndSize(NULL, 4 * capacity * 8);
    values = PyList_New(0);
    if (ints == NULL || values == NULL) {
        goto done;
    }
    if (LITERAL(&c, "[")) {
        do {
            if (count >= capacity) { /* cannot happen: see SHORTEST_RECORD */
                read = 0;
                break;
            }
            read = log_record(&c, (long long *)PyByteArray_AS_STRING(ints) + count, capacity,
                              values);
            count++;
        } while (read == 1 && LITERAL(&c, ","));
    }
    if (read < 0) {
        goto done;
    }
    if (read == 1 && c.p < c.end && *c.p == ']') {
        result = Py_BuildValue("OOnn", ints, values, capacity,
                               (Py_ssize_t)(c.p - (const unsigned char *)raw.buf));
    }
    else {
        result = Py_NewRef(Py_None);
    }
done:
    Py_XDECREF(ints);
    Py_XDECREF(values);
    PyBuffer_Release(&raw);
    return result;
}

/* Two int64 buffers of one length; 0 with an exception set when they are not. */
static int
ranges(PyObject *starts, PyObject *sizes, Py_buffer *a, Py_buffer *b)
{
    if (PyObject_GetBuffer(starts, a, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        return 0;
    }
    if (PyObject_GetBuffer(sizes, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(a);
        return 0;
    }
    if (a->itemsize != 8 || b->itemsize != 8 || a->len != b->len
        || strchr("qlL", a->format ? a->format[0] : 'B') == NULL
        || strchr("qlL", b->format ? b->format[0] : 'B') == NULL) {
        PyBuffer_Release(a);
        PyBuffer_Release(b);
        PyErr_SetString(PyExc_ValueError, "starts and sizes: int64 buffers of one length");
        return 0;
    }
    return 1;
}

/* 0 with an exception set unless [start, start + size) lies within `length` bytes. */
static int
within(long long start, long long size, Py_ssize_t length)
{
    if (start < 0 || size > length || start > length - size) {
        PyErr_SetString(PyExc_ValueError, "a byte range outside the data");
        return 0;
    }
    return 1;
}

static PyObject *
texts(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer raw, a, b;
    PyObject *starts, *sizes, *result = NULL, *item;
    const long long *start, *size;
    const unsigned char *data;
    Py_ssize_t n, i, j;

    if (!PyArg_ParseTuple(args, "y*OO", &raw, &starts, &sizes)) {
        return NULL;
    }
    if (!ranges(starts, sizes, &a, &b)) {
        PyBuffer_Release(&raw);
        return NULL;
    }
    data = (const unsigned char *)raw.buf;
    start = (const long long *)a.buf;
    size = (const long long *)b.buf;
    n = a.len / 8;
    result = PyList_New(n);
    for (i = 0; result != NULL && i < n; i++) {
        if (size[i] < 0) {
            item = Py_NewRef(Py_None);
        }
        else if (!within(start[i], size[i], raw.len)) {
            item = NULL;
        }
        else {
            int high = 0;
            for (j = 0; j < size[i]; j++) {
                high |= data[start[i] + j] & 0x80;
            }
            item = text(data + start[i], size[i], high);
            if (item == NULL && !PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError, "a byte range that is not UTF-8");
            }
        }
        if (item == NULL) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, i, item);
    }
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    PyBuffer_Release(&raw);
    return result;
}

static PyObject *
equal(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer raw, a, b, c, d;
    PyObject *a_starts, *a_sizes, *b_starts, *b_sizes, *result = NULL;
    const long long *as, *an, *bs, *bn;
    const unsigned char *data;
    Py_ssize_t n, i;
    int same = 1;

    if (!PyArg_ParseTuple(args, "y*OOOO", &raw, &a_starts, &a_sizes, &b_starts, &b_sizes)) {
        return NULL;
    }
    if (!ranges(a_starts, a_sizes, &a, &b)) {
        PyBuffer_Release(&raw);
        return NULL;
    }
    if (!ranges(b_starts, b_sizes, &c, &d)) {
        PyBuffer_Release(&a);
        PyBuffer_Release(&b);
        PyBuffer_Release(&raw);
        return NULL;
    }
    data = (const unsigned char *)raw.buf;
    as = (const long long *)a.buf;
    an = (const long long *)b.buf;
    bs = (const long long *)c.buf;
    bn = (const long long *)d.buf;
    n = a.len / 8;
    if (c.len != a.len) {
        PyErr_SetString(PyExc_ValueError, "two lists of ranges of different lengths");
    }
    else {
        for (i = 0; i < n && same; i++) {
            if (!within(as[i], an[i], raw.len) || !within(bs[i], bn[i], raw.len)) {
                break;
            }
            same = an[i] == bn[i] && memcmp(data + as[i], data + bs[i], an[i]) == 0;
        }
        if (!PyErr_Occurred()) {
            result = PyBool_FromLong(same);
        }
    }
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    PyBuffer_Release(&c);
    PyBuffer_Release(&d);
    PyBuffer_Release(&raw);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(raw, no_partition, no_offset): the send lines of a JSON Lines history as columns "
     "(see the module's source)."},
    {"log_records", log_records, METH_VARARGS,
     "log_records(raw, start, stop): the records array opening at raw[start] as columns, or "
     "None when it is not in the model's shape (see the module's source)."},
    {"texts", texts, METH_VARARGS,
     "texts(raw, starts, sizes): the byte ranges of raw as str (None where size < 0)."},
    {"equal", equal, METH_VARARGS,
     "equal(raw, a_starts, a_sizes, b_starts, b_sizes): whether each range a[i] holds the "
     "same bytes as b[i]."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_jsonl_scan",
    .m_doc = "Send lines of a JSON Lines history as columns in one pass (an optional "
             "accelerator of eosim.analysis.jsonl_reader).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__jsonl_scan(void)
{
    return PyModule_Create(&module);
}
