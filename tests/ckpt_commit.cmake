# odl_ckpt_commit (odl/ckpt.h): commit + retention of a checkpoint directory, shared by the unsupervised
# writer and odl_coordinator (docs/checkpoints.md "Retention"). The supervised cases are coord_retain,
# coord_commit_refused and coord_write_fails (tests/coord.cmake).
odl_add_test(test_ckpt_commit SOURCES test_ckpt_commit.c LABELS unit TIMEOUT 60)
