/* odl_worker --task=eval: one entry that picks the evaluation of --model: MNIST models in
 * worker/eval_mnist.c, YOLOv5 (mAP, val.py) in worker/eval.c. */
#include <stdio.h>
#include <string.h>

#include "worker/tasks.h"

int odl_task_eval_main(int argc, char **argv) {
    const char *model = "mnist";
    int given = 0, help = 0;
    for (int i = 1; i < argc; i++) {
        if (!strncmp(argv[i], "--model=", 8)) model = argv[i] + 8, given = 1;
        else if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[i + 1], given = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) help = 1;
    }
    /* --task=eval --help without a model: say that the YOLOv5 evaluation has options of its own. */
    if (help && !given)
        printf("odl_worker --task=eval evaluates MNIST-family weights (options below) or, with --model=yolov5,\n"
               "YOLOv5 weights with val.py's mAP: see odl_worker --task=eval --model=yolov5 --help.\n\n");
    if (!strcmp(model, "yolov5")) return odl_task_eval_yolov5_main(argc, argv);
    return odl_task_eval_mnist_main(argc, argv);
}
