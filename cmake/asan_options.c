/* Linked into every executable of an ODL_ASAN build (CMakeLists.txt): AddressSanitizer's compiled-in
 * options. ASan reads them before ASAN_OPTIONS, which adds to them (a test's ASAN_OPTIONS=detect_leaks=0
 * keeps these), so every process a test starts -- mpirun's ranks, the coordinator's children -- runs
 * with them. detect_stack_use_after_return: a pointer into a returned frame (issue 27: a monitor thread
 * read a caller's stack buffer) reads a poisoned fake frame instead of whatever the stack holds now.
 * The function must be in the executable: libasan's weak default wins over one in a shared library. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "detect_stack_use_after_return=1"; }
