/* Entry points of odl_worker's tasks (worker/main.c picks one by --task). Each parses its own flags from
 * the full argv, prints one clear error line on failure and returns the process exit code (0 ok, 1
 * failure, 2 usage error). */
#ifndef ODL_WORKER_TASKS_H
#define ODL_WORKER_TASKS_H

/* --task=train (worker/launch.c): the flags, then one process or a launched rank. */
int odl_task_train_main(int argc, char **argv);
/* --task=infer (worker/infer.c): YOLOv5 detection of images, detect.py's habits. */
int odl_task_infer_main(int argc, char **argv);
/* --task=eval: worker/eval_dispatch.c picks the evaluation of --model: MNIST weights in
 * worker/eval_mnist.c, YOLOv5 (val.py's mAP) in worker/eval.c. */
int odl_task_eval_main(int argc, char **argv);
int odl_task_eval_mnist_main(int argc, char **argv);
int odl_task_eval_yolov5_main(int argc, char **argv);

#endif
