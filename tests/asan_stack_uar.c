/* test_asan_stack_uar (ODL_ASAN builds only): the sanitizer's compiled-in options are in force in a
 * test's process (cmake/asan_options.c) -- reading a returned frame's local through a kept pointer, the
 * pattern of issue 27, is reported as stack-use-after-return. Without detect_stack_use_after_return the
 * read goes unnoticed and the program prints "not detected". */
#include <stdio.h>
#include <string.h>

static const char *kept;

__attribute__((noinline)) static void keep_local(void) {
    char bus[32];
    snprintf(bus, sizeof bus, "0000:86:00.0");
    kept = bus; /* as a struct of options kept by value, its pointer included */
}

__attribute__((noinline)) static void overwrite_stack(void) {
    volatile char junk[256];
    memset((char *)junk, 'x', sizeof junk);
}

int main(void) {
    keep_local();
    overwrite_stack();
    printf("read %.12s: not detected\n", kept);
    return 1;
}
