/* odl/precision.h: names of the matmul precisions and the process-wide setting the tensor-level ops read. */
#include "odl/precision.h"

#include <stdatomic.h>
#include <string.h>

static const char *const g_names[] = {"fp32", "tf32", "bf16", NULL};
#define NNAMES ((int)(sizeof g_names / sizeof g_names[0]) - 1)

const char *const *odl_precision_names(void) { return g_names; }

const char *odl_precision_name(odl_precision p) { return (int)p >= 0 && (int)p < NNAMES ? g_names[p] : "?"; }

odl_status odl_precision_parse(const char *s, odl_precision *out) {
    for (int i = 0; s && i < NNAMES; i++)
        if (strcmp(s, g_names[i]) == 0) {
            *out = (odl_precision)i;
            return ODL_OK;
        }
    return ODL_ERR(ODL_E_CONFIG, "precision '%s' is not one of fp32, tf32, bf16", s ? s : "(null)");
}

/* atomic so that a setting made before worker threads start is seen by all of them without a race */
static atomic_int g_matmul_precision = ODL_PRECISION_FP32;

void odl_set_matmul_precision(odl_precision p) { atomic_store(&g_matmul_precision, (int)p); }

odl_precision odl_matmul_precision(void) { return (odl_precision)atomic_load(&g_matmul_precision); }
