/* odl_worker: one program for every task (--task=train|infer|eval). Run directly it is the
 * single-process program; under mpirun or srun it is one rank of a data-parallel job. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "odl/env.h"
#include "worker/cli.h"
#include "worker/tasks.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: odl_worker --task=train|infer|eval [options]\n"
            "  odl_worker --task=train --model=mnist --data_dir=DIR [--config FILE.yaml] [--epochs N]\n"
            "             [--batch-size B] [--lr X] [--device auto|cpu|cuda] [--seed S] [--max-steps N]\n"
            "             [--max-train-samples N] [--save FILE.h5] [--metrics-out FILE.jsonl] [--KEY=VALUE]\n"
            "  odl_worker --task=infer --model=yolov5 --weights=W.h5 --source=IMAGE|DIR [options]\n"
            "  odl_worker --task=eval --model=mnist --weights=W.h5 [--data_dir=DIR]\n"
            "  odl_worker --task=eval --model=yolov5 --weights=W.h5 --data=D [options]   (YOLOv5 val.py mAP)\n"
            "  odl_worker --task=train --help     all training options\n"
            "  odl_worker --task=infer --help     all inference options (YOLOv5)\n"
            "  odl_worker --help-config           every config.yaml key\n"
            "  odl_worker --version               version, commit, CUDA/NCCL/MPI, GPU architectures\n");
}

/* The exit of --task=infer and eval. Their outputs are written and closed and what they hold released
 * when the task returns; what exit() still runs is the CUDA runtime's teardown (its primary context,
 * the modules), which the driver also does as the process ends: ODL_EXIT_SKIP_TEARDOWN ends the process
 * there with _exit() (issue 22: a one-image infer spent 91-116 ms after its timeline line on an H100,
 * 2026-12-07). */
static int end_task(int rc) {
    if (!odl_env_bool(ODL_ENV_EXIT_SKIP_TEARDOWN)) return rc;
    fflush(NULL);
    _exit(rc);
}

int main(int argc, char **argv) {
    if (odl_env_load() != ODL_OK) {
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
        return 2;
    }
    const char *task = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strncmp(argv[i], "--task=", 7)) task = argv[i] + 7;
        else if (!strcmp(argv[i], "--task") && i + 1 < argc) task = argv[i + 1];
        else if (!strcmp(argv[i], "--help-config")) return odl_task_train_main(argc, argv);
        else if (!strcmp(argv[i], "--version")) {
            odl_cli_print_version(stdout);
            return 0;
        }
    }
    if (!task) {
        for (int i = 1; i < argc; i++)
            if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
                usage(stdout);
                return 0;
            }
        fprintf(stderr, "odl_worker: error: --task is required\n");
        usage(stderr);
        return 2;
    }
    if (!strcmp(task, "train")) return odl_task_train_main(argc, argv);
    if (!strcmp(task, "infer")) return end_task(odl_task_infer_main(argc, argv));
    if (!strcmp(task, "eval")) return end_task(odl_task_eval_main(argc, argv));
    fprintf(stderr, "odl_worker: error: unknown task '%s' (train, infer, eval)\n", task);
    return 2;
}
