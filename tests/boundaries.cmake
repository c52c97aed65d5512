# Library boundaries (issue 11): the HDF5 reader entries the models use, and the layering check.
odl_add_test(test_h5io_reader SOURCES test_h5io_reader.c LABELS unit TIMEOUT 60)
# The environment-variable table (odl/env.h) against docs/environment.md, bad values, odl_worker's exit.
odl_add_test(test_env SOURCES test_env.c LABELS unit TIMEOUT 60)
