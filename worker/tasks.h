/* Entry points of odl_worker's tasks. Each parses its own flags from the full argv, prints one clear
 * error line on failure and returns the process exit code (0 ok, 1 failure, 2 usage error). */
#ifndef ODL_WORKER_TASKS_H
#define ODL_WORKER_TASKS_H

int odl_task_train_main(int argc, char **argv);
/* Defined in worker/infer.c when the image libraries are built in. */
int odl_task_infer_main(int argc, char **argv) __attribute__((weak));
/* --task=eval: dispatches on --model (worker/eval_dispatch.c); MNIST in worker/eval_mnist.c. */
int odl_task_eval_main(int argc, char **argv);
int odl_task_eval_mnist_main(int argc, char **argv);
int odl_task_eval_yolov5_main(int argc, char **argv) __attribute__((weak));

/* --task=eval: odl_task_eval_main picks the evaluation of --model; YOLOv5's (val.py's mAP) is
 * worker/eval.c, which also holds a weak odl_task_eval_main for a binary with no other evaluation. */
int odl_task_eval_main(int argc, char **argv);
int odl_task_eval_yolov5_main(int argc, char **argv) __attribute__((weak));

#endif
