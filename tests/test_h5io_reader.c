/* test_h5io_reader: the reader entries that the YOLOv5 weights loader needs (odl/h5io.h):
 * odl_h5_reader_exists, odl_h5_reader_attr_f64s (integer and float arrays), odl_h5_reader_read_strings
 * (variable-length and fixed-size), on a file written with the HDF5 C API as h5py writes it. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "odl/h5io.h"
#include "test_util.h"

static void write_fixture(const char *path) {
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t g = H5Gcreate2(f, "layers", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t g2 = H5Gcreate2(g, "03", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int from[3] = {-1, 6, 10};
    hsize_t n3 = 3;
    hid_t sp = H5Screate_simple(1, &n3, NULL);
    hid_t a = H5Acreate2(g2, "from", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT, from);
    H5Aclose(a);
    H5Sclose(sp);
    double eps = 1e-3;
    sp = H5Screate(H5S_SCALAR);
    a = H5Acreate2(g2, "eps", H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_DOUBLE, &eps);
    H5Aclose(a);
    H5Sclose(sp);
    /* variable-length UTF-8 strings, as h5py's string_dtype() */
    const char *names[3] = {"person", "bicycle", ""};
    hid_t vt = H5Tcopy(H5T_C_S1);
    H5Tset_size(vt, H5T_VARIABLE);
    H5Tset_cset(vt, H5T_CSET_UTF8);
    sp = H5Screate_simple(1, &n3, NULL);
    hid_t d = H5Dcreate2(f, "names", vt, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, vt, H5S_ALL, H5S_ALL, H5P_DEFAULT, names);
    H5Dclose(d);
    H5Tclose(vt);
    /* fixed-size strings (numpy 'S4'), not NUL-terminated */
    hid_t ft = H5Tcopy(H5T_C_S1);
    H5Tset_size(ft, 4);
    H5Tset_strpad(ft, H5T_STR_NULLPAD);
    d = H5Dcreate2(f, "fixed", ft, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, ft, H5S_ALL, H5S_ALL, H5P_DEFAULT, "abcdefghij\0\0");
    H5Dclose(d);
    H5Tclose(ft);
    float v[3] = {1, 2, 3};
    d = H5Dcreate2(f, "layers/03/w", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    H5Dclose(d);
    H5Sclose(sp);
    H5Gclose(g2);
    H5Gclose(g);
    H5Fclose(f);
}

int main(void) {
    char dir[64];
    if (odl_test_mkdtemp(dir, sizeof dir, "h5io_reader")) return 1;
    char path[128];
    snprintf(path, sizeof path, "%s/fixture.h5", dir);
    write_fixture(path);
    odl_h5_reader *r = NULL;
    TOK(odl_h5_reader_open(path, &r));
    if (!r) return odl_test_finish("test_h5io_reader");

    TCHECK(odl_h5_reader_exists(r, "/") == 1, "root");
    TCHECK(odl_h5_reader_exists(r, "layers/03") == 1, "group without leading slash");
    TCHECK(odl_h5_reader_exists(r, "/layers/03/w") == 1, "dataset");
    TCHECK(odl_h5_reader_exists(r, "layers/04") == 0, "missing group");
    TCHECK(odl_h5_reader_exists(r, "layers/03/w/x") == 0, "below a dataset");
    TCHECK(odl_h5_reader_has(r, "layers/03") == 0, "a group is not a dataset");

    double vals[4] = {0};
    int n = 0;
    TOK(odl_h5_reader_attr_f64s(r, "layers/03", "from", vals, 4, &n));
    TCHECK(n == 3 && vals[0] == -1 && vals[1] == 6 && vals[2] == 10, "from = %d: %g %g %g", n, vals[0], vals[1], vals[2]);
    TOK(odl_h5_reader_attr_f64s(r, "layers/03", "eps", vals, 1, &n));
    TCHECK(n == 1 && vals[0] == 1e-3, "eps %g", vals[0]);
    TFAIL(odl_h5_reader_attr_f64s(r, "layers/03", "from", vals, 2, &n), ODL_E_INVAL);
    TCHECK(strstr(odl_error_msg(), "3 elements") && strstr(odl_error_msg(), "1..2"), "%s", odl_error_msg());
    TFAIL(odl_h5_reader_attr_f64s(r, "layers/03", "nope", vals, 2, &n), ODL_E_NOTFOUND);
    int64_t i64 = 0;
    TFAIL(odl_h5_reader_attr_i64(r, "layers/03", "from", &i64), ODL_E_INVAL); /* scalars stay scalars */
    TCHECK(strstr(odl_error_msg(), "a scalar is expected") != NULL, "%s", odl_error_msg());

    char *s[3] = {0};
    TOK(odl_h5_reader_read_strings(r, "names", 3, s));
    TCHECK(s[0] && !strcmp(s[0], "person") && s[1] && !strcmp(s[1], "bicycle") && s[2] && !s[2][0], "vlen strings");
    for (int i = 0; i < 3; i++) free(s[i]);
    TOK(odl_h5_reader_read_strings(r, "/fixed", 3, s));
    TCHECK(s[0] && !strcmp(s[0], "abcd") && s[1] && !strcmp(s[1], "efgh") && s[2] && !strcmp(s[2], "ij"),
           "fixed strings '%s' '%s' '%s'", s[0], s[1], s[2]);
    for (int i = 0; i < 3; i++) free(s[i]);
    TFAIL(odl_h5_reader_read_strings(r, "names", 2, s), ODL_E_INVAL);
    TCHECK(strstr(odl_error_msg(), "must hold 2 strings (has 3)") && s[0] == NULL && s[1] == NULL, "%s", odl_error_msg());
    TFAIL(odl_h5_reader_read_strings(r, "layers/03/w", 3, s), ODL_E_INVAL);
    TCHECK(strstr(odl_error_msg(), "not strings") != NULL, "%s", odl_error_msg());
    TFAIL(odl_h5_reader_read_strings(r, "absent", 1, s), ODL_E_NOTFOUND);

    odl_h5_reader_close(r);
    unlink(path);
    rmdir(dir);
    return odl_test_finish("test_h5io_reader");
}
