# Library boundaries (issue 11): the HDF5 reader entries the models use, and the layering check.
odl_add_test(test_h5io_reader SOURCES test_h5io_reader.c LABELS unit TIMEOUT 60)
