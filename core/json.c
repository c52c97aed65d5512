/* JSON helpers over jansson; see odl/json.h. */
#include "odl/json.h"
#include "odl/file.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

json_t *odl_json_num(double v, int decimals) {
    if (!isfinite(v)) return json_null();
    if (decimals >= 0 && decimals <= 15) {
        double scale = pow(10.0, decimals);
        double r = nearbyint(v * scale) / scale;
        if (isfinite(r)) v = r;
    }
    return json_real(v);
}

odl_status odl_json_write_line(FILE *f, const json_t *v, const char *what) {
    if (!f || !v) return ODL_ERR(ODL_E_INVAL, "%s: nothing to write", what ? what : "JSON");
    if (json_dumpf(v, f, ODL_JSON_FLAGS | JSON_COMPACT) != 0 || fputc('\n', f) == EOF || fflush(f) != 0)
        return ODL_ERR(ODL_E_IO, "%s: write failed: %s", what ? what : "JSON", strerror(errno));
    return ODL_OK;
}

odl_status odl_json_load_file(const char *path, json_t **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        return ODL_ERR(e == ENOENT ? ODL_E_NOTFOUND : ODL_E_IO, "%s: %s", path, strerror(e));
    }
    json_error_t err;
    json_t *v = json_loadf(f, JSON_REJECT_DUPLICATES, &err);
    fclose(f);
    if (!v) return ODL_ERR(ODL_E_FORMAT, "%s:%d:%d: not valid JSON: %s", path, err.line, err.column, err.text);
    *out = v;
    return ODL_OK;
}

long long odl_json_int(const json_t *obj, const char *key, long long dflt) {
    const json_t *v = json_object_get(obj, key);
    return json_is_integer(v) ? (long long)json_integer_value(v) : dflt;
}

odl_status odl_json_save_file(const char *path, const json_t *v, size_t flags) {
    if (!v) return ODL_ERR(ODL_E_NOMEM, "%s: no JSON to write", path);
    char *text = json_dumps(v, flags);
    if (!text) return ODL_ERR(ODL_E_NOMEM, "%s: the JSON does not encode (not UTF-8?)", path);
    size_t len = strlen(text);
    text[len] = '\n'; /* json_dumps leaves no newline; the NUL's place takes it */
    odl_status s = odl_file_write_atomic(path, text, len + 1, 0, NULL);
    free(text);
    return s;
}
