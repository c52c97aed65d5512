/* The fence list: persistence across processes (a coordinator restart is a reload of the file),
 * fence-once, operator lift, hostfile and srun --exclude output, and scontrol drain once per node
 * through a stand-in scontrol (a shell script that records its arguments; ODL_SCONTROL). The real
 * scontrol is exercised in tests/slurm_local.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "odl/env.h"
#include "odl/health.h"
#include "test_util.h"

static char g_dir[256];

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

static char *read_file(const char *path) {
    static char buf[8192];
    FILE *f = fopen(path, "r");
    buf[0] = '\0';
    if (!f) return buf;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static odl_fence mk(const char *node, int xid, const char *gpu, int gen) {
    odl_fence f;
    memset(&f, 0, sizeof f);
    snprintf(f.node, sizeof f.node, "%s", node);
    f.xid = xid;
    snprintf(f.gpu, sizeof f.gpu, "%s", gpu);
    f.generation = gen;
    return f;
}

static void test_persist(void) {
    odl_fence_list l;
    TOK(odl_fence_list_load(&l, g_dir));
    TCHECK(l.n == 0, "no file: empty list");
    int added = -1;
    odl_fence f = mk("node2", 79, "0000:3b:00.0", 3);
    TOK(odl_fence_add(&l, &f, &added));
    TCHECK(added == 1, "first fence added");
    f = mk("node2", 48, "0000:5e:00.0", 4);
    TOK(odl_fence_add(&l, &f, &added));
    TCHECK(added == 0 && l.n == 1, "a node is fenced once (n %d)", l.n);
    f = mk("node4", ODL_XID_BUS_LOST, "0000:86:00.0", 4);
    TOK(odl_fence_add(&l, &f, &added));
    TCHECK(added == 1 && l.n == 2, "second node");
    odl_fence_list_free(&l);

    /* A new process (a restarted coordinator) sees the same fences. */
    TOK(odl_fence_list_load(&l, g_dir));
    TCHECK(l.n == 2, "reloaded %d fences", l.n);
    const odl_fence *g = odl_fence_find(&l, "node2");
    TCHECK(g && g->xid == 79 && !strcmp(g->gpu, "0000:3b:00.0") && g->generation == 3 && g->time > 1600000000 &&
               !strcmp(g->reason, "odl: Xid 79 on 0000:3b:00.0"),
           "node2's first entry survives: xid %d gpu %s gen %d reason '%s'", g ? g->xid : -1, g ? g->gpu : "",
           g ? g->generation : -1, g ? g->reason : "");
    g = odl_fence_find(&l, "node4");
    TCHECK(g && g->xid == ODL_XID_BUS_LOST && strstr(g->reason, "fallen off the bus"), "bus-lost reason '%s'",
           g ? g->reason : "");
    TCHECK(odl_fence_find(&l, "node1") == NULL, "node1 not fenced");

    char buf[256];
    TOK(odl_fence_srun_exclude(&l, buf, sizeof buf));
    TCHECK(!strcmp(buf, "--exclude=node2,node4"), "exclude '%s'", buf);
    TFAIL(odl_fence_srun_exclude(&l, buf, 12), ODL_E_INVAL);

    /* Hostfile without the fenced hosts; comments and slots kept. */
    char in[300], out[300];
    snprintf(in, sizeof in, "%s/hosts", g_dir);
    snprintf(out, sizeof out, "%s/hosts.relaunch", g_dir);
    write_file(in, "# job hosts\nnode1 slots=2\nnode2 slots=2 max_slots=2\n\n  node3 slots=2\nnode4\nnode22 slots=1\n");
    int kept = 0;
    TOK(odl_fence_write_hostfile(&l, in, out, &kept));
    const char *h = read_file(out);
    TCHECK(kept == 3, "kept %d hosts", kept);
    TCHECK(strstr(h, "node1 slots=2\n") && strstr(h, "  node3 slots=2\n") && strstr(h, "node22 slots=1\n") &&
               strstr(h, "# job hosts\n"),
           "kept lines:\n%s", h);
    TCHECK(!strstr(h, "\nnode2 ") && !strstr(h, "\nnode4\n") && strstr(h, "# node2 fenced by odl"), "fenced lines:\n%s", h);
    write_file(in, "node2 slots=1\nnode4 slots=1\n");
    TFAIL(odl_fence_write_hostfile(&l, in, out, &kept), ODL_E_INVAL);
    TFAIL(odl_fence_write_hostfile(&l, "/nonexistent/hosts", out, &kept), ODL_E_IO);

    /* Lift: only by the operator's command; history is kept. */
    TOK(odl_fence_lift(&l, "node2", "alice"));
    TFAIL(odl_fence_lift(&l, "node2", "alice"), ODL_E_NOTFOUND);
    TFAIL(odl_fence_lift(&l, "node9", "alice"), ODL_E_NOTFOUND);
    odl_fence_list_free(&l);
    TOK(odl_fence_list_load(&l, g_dir));
    TCHECK(odl_fence_find(&l, "node2") == NULL && odl_fence_find(&l, "node4") != NULL, "node2 lifted, node4 holds");
    TCHECK(l.n == 2 && l.items[0].lifted_time > 0 && !strcmp(l.items[0].lifted_by, "alice"), "history kept");
    TOK(odl_fence_srun_exclude(&l, buf, sizeof buf));
    TCHECK(!strcmp(buf, "--exclude=node4"), "exclude after lift '%s'", buf);
    /* A lifted node can be fenced again. */
    f = mk("node2", 74, "0000:3b:00.0", 5);
    TOK(odl_fence_add(&l, &f, &added));
    TCHECK(added == 1 && l.n == 3 && odl_fence_find(&l, "node2")->xid == 74, "re-fenced after lift");
    odl_fence_list_free(&l);
}

static void test_drain(void) {
    char script[300], log[300];
    snprintf(script, sizeof script, "%s/scontrol", g_dir);
    snprintf(log, sizeof log, "%s/scontrol.log", g_dir);
    char text[1024];
    /* Records one line per call; fails for node "bad". */
    snprintf(text, sizeof text,
             "#!/bin/sh\nfor a in \"$@\"; do printf '[%%s]' \"$a\"; done >>%s\necho >>%s\n"
             "case \"$2\" in NodeName=bad) exit 3;; esac\nexit 0\n",
             log, log);
    write_file(script, text);
    chmod(script, 0755);
    setenv("ODL_SCONTROL", script, 1);
    TOK(odl_env_reload());

    odl_fence_list l;
    TOK(odl_fence_list_load(&l, g_dir));
    int issued = -1;
    TOK(odl_fence_drain(&l, &issued));
    TCHECK(issued == 2, "drained node4 and node2 (issued %d)", issued);
    const char *lg = read_file(log);
    TCHECK(strstr(lg, "[update][NodeName=node4][State=DRAIN][Reason=odl: GPU fallen off the bus on 0000:86:00.0 "
                      "(generation 4)]\n") != NULL,
           "node4 drain arguments:\n%s", lg);
    TCHECK(strstr(lg, "[update][NodeName=node2][State=DRAIN][Reason=odl: Xid 74 on 0000:3b:00.0 (generation 5)]\n") != NULL,
           "node2 drain arguments:\n%s", lg);
    odl_fence_list_free(&l);
    /* Once per node, across processes. */
    TOK(odl_fence_list_load(&l, g_dir));
    TOK(odl_fence_drain(&l, &issued));
    TCHECK(issued == 0, "second drain issues nothing (%d)", issued);
    int calls = 0;
    for (const char *p = read_file(log); *p; p++) calls += *p == '\n';
    TCHECK(calls == 2, "scontrol ran %d times", calls);
    /* A failing scontrol: error names the node, the fence stays undrained. */
    odl_fence f = mk("bad", 79, "0000:3b:00.0", 6);
    int added;
    TOK(odl_fence_add(&l, &f, &added));
    TFAIL(odl_fence_drain(&l, &issued), ODL_E_IO);
    TCHECK(strstr(odl_error_msg(), "NodeName=bad") && strstr(odl_error_msg(), "exit status 3"), "message: %s",
           odl_error_msg());
    TCHECK(!odl_fence_find(&l, "bad")->drained, "not marked drained");
    odl_fence_list_free(&l);
}

static void test_corrupt(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/fence.json", g_dir);
    odl_fence_list l;
    write_file(path, "{\"version\": 1, \"fences\": [{\"node\": \"n1\"}]}");
    TFAIL(odl_fence_list_load(&l, g_dir), ODL_E_FORMAT);
    TCHECK(strstr(odl_error_msg(), "fence.json"), "names the file: %s", odl_error_msg());
    write_file(path, "{not json");
    TFAIL(odl_fence_list_load(&l, g_dir), ODL_E_FORMAT);
    write_file(path, "[]");
    TFAIL(odl_fence_list_load(&l, g_dir), ODL_E_FORMAT);
    write_file(path, "{\"version\": 1, \"fences\": [{\"node\": \"n1\", \"xid\": \"79\", \"time\": 5}]}");
    TFAIL(odl_fence_list_load(&l, g_dir), ODL_E_FORMAT);
    odl_fence_list_free(&l);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/odl_fence_test.XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_persist();
    test_drain();
    test_corrupt();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (!odl_test_failures && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return odl_test_finish("test_health_fence");
}
