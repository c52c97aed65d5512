/* Repeated application Xids escalate (docs/health.md "Fencing end to end"): every application Xid
 * restarts the job, so a worker's classifier never sees more than one; the coordinator keeps each
 * node's application Xids in DIR/xid_history.json, which outlives generations and a coordinator restart
 * as fence.json does. Format (jansson):
 *   {"version": 1, "nodes": {"nodeB": [{"xid": 13, "time": 1764580000}, ...]}}  (time: Unix seconds) */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "coordinator/coord.h"
#include "odl/health.h"
#include "odl/json.h"
#include "odl/strbuf.h"

odl_status coord_xid_history_add(const char *job_dir, const char *node, int xid, const odl_xid_table *t, int *n_out,
                                 char *codes, size_t cap) {
    *n_out = 0;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/xid_history.json", job_dir);
    json_t *root = NULL;
    odl_status s = odl_json_load_file(path, &root);
    if (s == ODL_E_NOTFOUND) root = json_pack("{s:i, s:{}}", "version", 1, "nodes");
    else if (s != ODL_OK) return s;
    json_t *nodes = json_object_get(root, "nodes");
    if (!root || !json_is_object(nodes)) {
        json_decref(root);
        return ODL_ERR(ODL_E_FORMAT, "%s: no \"nodes\" object", path);
    }
    int64_t now = (int64_t)time(NULL);
    json_t *kept = json_array(), *old = json_object_get(nodes, node);
    size_t i;
    json_t *e;
    json_array_foreach(old, i, e) { /* entries outside the window are dropped: the file stays small */
        int64_t when = odl_json_int(e, "time", 0);
        if (t->escalate_window_s > 0 && (double)(now - when) > t->escalate_window_s) continue;
        json_array_append(kept, e);
    }
    json_array_append_new(kept, json_pack("{s:i, s:I}", "xid", xid, "time", (json_int_t)now));
    json_object_set_new(nodes, node, kept);
    *n_out = (int)json_array_size(kept);
    odl_strbuf b;
    odl_strbuf_fixed(&b, codes, cap);
    json_array_foreach(kept, i, e) odl_strbuf_printf(&b, "%s%lld", i ? "," : "", odl_json_int(e, "xid", 0));
    s = odl_json_save_file(path, root, JSON_INDENT(2) | JSON_SORT_KEYS); /* durable, as fence.json */
    json_decref(root);
    return s;
}
