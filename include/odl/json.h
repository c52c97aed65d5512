/* JSON through jansson for every file the project writes or reads (detections.json, the metrics JSONL,
 * manifest.json): escaping is jansson's, and a NaN or infinity is written as null, never as `nan`.
 * Public so that odl_worker and the tests share it with the library. This header does not include
 * jansson's: json_t is declared opaque here (the same typedef as jansson's, which C11 allows twice), so a
 * program that includes every odl header compiles without jansson; a file that builds or reads the
 * values includes <jansson.h> itself. */
#ifndef ODL_JSON_H
#define ODL_JSON_H

#include <stddef.h>
#include <stdio.h>

#include "odl/api.h"
#include "odl/status.h"

typedef struct json_t json_t;

/* Dump flags: 10 significant digits, so 0.1 stays 0.1 and pixel coordinates keep 4 decimals. Expands to
 * jansson's macros, so only a file that includes <jansson.h> can use it. */
#define ODL_JSON_FLAGS (JSON_REAL_PRECISION(10) | JSON_PRESERVE_ORDER)

/* A number rounded to `decimals` places, or null when v is NaN or infinite. New reference. */
ODL_API json_t *odl_json_num(double v, int decimals);

/* One compact line: the object, '\n', flushed. Errors: ODL_E_IO (message names `what`). */
ODL_API odl_status odl_json_write_line(FILE *f, const json_t *v, const char *what);

/* Parse a whole file; *out is a new reference. Errors: ODL_E_NOTFOUND, ODL_E_IO, ODL_E_FORMAT with the
 * path, line and column of the first syntax error. */
ODL_API odl_status odl_json_load_file(const char *path, json_t **out);

/* Replace the file at path with v and a final newline, durably (odl_file_write_atomic, odl/file.h).
 * flags: jansson's dump flags (JSON_INDENT(2) | JSON_SORT_KEYS, ODL_JSON_FLAGS, ...). v NULL: ODL_E_NOMEM
 * (what a failed json_pack returns), so a caller can pass a builder's result straight in. Errors:
 * ODL_E_NOMEM, ODL_E_IO. v's reference stays the caller's. */
ODL_API odl_status odl_json_save_file(const char *path, const json_t *v, size_t flags);

/* Integer member `key` of an object, or `dflt` when absent or not an integer. */
ODL_API long long odl_json_int(const json_t *obj, const char *key, long long dflt);

#endif
