/* Launcher detection and process-group set-up around odl_train_run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "odl/config.h"
#include "odl/device.h"
#include "odl/log.h"
#include "worker/train.h"

static char g_yaml[ODL_CONFIG_YAML_MAX];

static void log_effective_config(const odl_config *cfg) {
    if (odl_config_to_yaml(cfg, g_yaml, sizeof g_yaml) == ODL_OK) ODL_LOG_INFO("effective config:\n%s", g_yaml);
}

int odl_train_launch(const odl_config *cfg, odl_train_opts *opts) {
    opts->rank = 0;
    opts->world_size = 1;
    opts->local_rank = 0;
    odl_log_set_rank(0, 1);
    log_effective_config(cfg);
    odl_train_result r;
    odl_status s = odl_train_run(cfg, opts, &r);
    odl_cuda_shutdown();
    if (s != ODL_OK) {
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg());
        return 1;
    }
    return 0;
}
