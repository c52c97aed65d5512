/* Uses the installed library: a small GEMM through the public API, checked against plain loops. */
#include <math.h>
#include <stdio.h>

#include "odl/ops.h"

int main(void) {
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {7, 8, 9, 10, 11, 12}, c[4];
    odl_tensor A, B, C;
    int64_t sa[2] = {2, 3}, sb[2] = {3, 2}, sc[2] = {2, 2};
    if (odl_tensor_alloc(&A, odl_cpu(), ODL_F32, 2, sa) || odl_tensor_alloc(&B, odl_cpu(), ODL_F32, 2, sb) ||
        odl_tensor_alloc(&C, odl_cpu(), ODL_F32, 2, sc)) {
        fprintf(stderr, "alloc: %s\n", odl_error_msg());
        return 1;
    }
    odl_tensor_copy_from_host(&A, a, sizeof a);
    odl_tensor_copy_from_host(&B, b, sizeof b);
    if (odl_gemm(0, 0, 1.0f, &A, &B, 0.0f, &C, NULL, NULL, ODL_ACT_NONE) != ODL_OK) {
        fprintf(stderr, "gemm: %s\n", odl_error_msg());
        return 1;
    }
    odl_tensor_copy_to_host(&C, c, sizeof c);
    const float want[4] = {58, 64, 139, 154};
    for (int i = 0; i < 4; i++)
        if (fabsf(c[i] - want[i]) > 1e-4f) {
            fprintf(stderr, "c[%d] = %g, want %g\n", i, c[i], want[i]);
            return 1;
        }
    printf("consumer: gemm through the installed libodl OK\n");
    odl_tensor_free(&C);
    odl_tensor_free(&B);
    odl_tensor_free(&A);
    return 0;
}
