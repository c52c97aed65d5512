# Checkpoints (docs/checkpoints.md): library and session unit tests, the sampler's cursor across world
# sizes, and end-to-end odl_worker runs on Fashion-MNIST (bit-exact resume, kill -9, damaged files,
# directories, a full disk, the odl_ckpt tool, a world-size change under mpirun).
odl_add_test(test_ckpt SOURCES test_ckpt.c ${PROJECT_SOURCE_DIR}/worker/checkpoint.c LABELS unit TIMEOUT 120)
odl_add_test(test_ckpt_sampler SOURCES test_ckpt_sampler.c LABELS unit TIMEOUT 120)
