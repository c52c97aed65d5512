/* odl_worker --task=eval: one entry that picks the evaluation of --model. MNIST models are evaluated
 * in worker/eval_mnist.c; YOLOv5 (mAP, val.py) joins here through odl_task_eval_yolov5_main when that
 * file is built in. */
#include <stdio.h>
#include <string.h>

#include "worker/tasks.h"

int odl_task_eval_main(int argc, char **argv) {
    const char *model = "mnist";
    for (int i = 1; i < argc; i++) {
        if (!strncmp(argv[i], "--model=", 8)) model = argv[i] + 8;
        else if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[i + 1];
    }
    if (!strcmp(model, "yolov5")) {
        if (!odl_task_eval_yolov5_main) {
            fprintf(stderr, "odl_worker: error: --task=eval --model=yolov5 is not built into this binary\n");
            return 2;
        }
        return odl_task_eval_yolov5_main(argc, argv);
    }
    return odl_task_eval_mnist_main(argc, argv);
}
