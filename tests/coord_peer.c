/* A hand-driven worker for the coordinator tests: registers through comm/coord_client.c as it is told
 * (a wrong secret, an old generation, a duplicate rank) and reports what the coordinator said.
 *   coord_peer ADDR SECRET_FILE RANK WORLD_SIZE GENERATION [HOLD_S]
 * Exit: 0 welcomed (held HOLD_S seconds with heartbeats, then goodbye), 3 refused (the reason on
 * stdout), 1 any other error. ODL_PEER_NODE names its node; ODL_PEER_XID=CODE[@S] reports a node-fatal
 * Xid S seconds after the welcome (within the hold). */
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
    const char *node = getenv("ODL_PEER_NODE"); /* the node it says it runs on */
    snprintf(h.node, sizeof h.node, "%s", node && node[0] ? node : "coord_peer");
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
    /* ODL_PEER_XID=CODE[@SECONDS]: report a node-fatal Xid CODE on GPU 0000:3b:00.0, SECONDS after the welcome */
    const char *xid = getenv("ODL_PEER_XID");
    double hold = argc > 6 ? atof(argv[6]) : 0;
    if (xid && xid[0]) {
        const char *at = strchr(xid, '@');
        double after = at ? atof(at + 1) : 0;
        usleep((useconds_t)(after * 1e6));
        odl_coord_client_xid(c, atoi(xid), 2, "0000:3b:00.0", "coord_peer: injected");
        hold -= after;
    }
    if (hold > 0) usleep((useconds_t)(hold * 1e6));
    odl_coord_client_close(c, 0);
    return 0;
}
