/* A hand-driven worker for the coordinator tests: registers through comm/coord_client.c as it is told
 * (a wrong secret, an old generation, a duplicate rank) and reports what the coordinator said.
 *   coord_peer ADDR SECRET_FILE RANK WORLD_SIZE GENERATION [HOLD_S]
 * Exit: 0 welcomed (held HOLD_S seconds with heartbeats, then goodbye), 3 refused (the reason on
 * stdout), 1 any other error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "odl/coord_client.h"

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: coord_peer ADDR SECRET_FILE RANK WORLD_SIZE GENERATION [HOLD_S]\n");
        return 1;
    }
    odl_coord_hello h;
    memset(&h, 0, sizeof h);
    h.rank = atoi(argv[3]);
    h.world_size = atoi(argv[4]);
    h.generation = strtoull(argv[5], NULL, 10);
    h.pid = (uint32_t)getpid();
    h.seed = 1;
    h.gpu_index = -1;
    snprintf(h.node, sizeof h.node, "coord_peer");
    odl_coord_welcome w;
    odl_coord_client *c = NULL;
    odl_status s = odl_coord_client_connect(argv[1], argv[2], &h, NULL, &w, &c);
    if (s == ODL_E_INVAL) {
        printf("refused: %s\n", odl_error_msg());
        return 3;
    }
    if (s != ODL_OK) {
        fprintf(stderr, "coord_peer: %s\n", odl_error_msg());
        return 1;
    }
    printf("welcome: generation %llu\n", (unsigned long long)w.generation);
    fflush(stdout);
    if (argc > 6) usleep((useconds_t)(atof(argv[6]) * 1e6));
    odl_coord_client_close(c, 0);
    return 0;
}
