/* Frame codec and ODL_FAULT parser (comm/coord_wire.h, odl/fault.h): round trips and the bad inputs
 * of the coordinator issue: truncated frames, lengths 0 and 0x7FFFFFFF, an 11-byte varint, random
 * bytes, a message fed byte by byte, two messages in one buffer, a foreign protocol version. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/coord_wire.h"
#include "odl/fault.h"

static int fails;
#define EXPECT(c)                                                              \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "%s:%d: FAIL %s (%s)\n", __FILE__, __LINE__, #c, odl_error_msg()); \
            fails++;                                                           \
        }                                                                      \
    } while (0)

static size_t heartbeat_frame(uint8_t *buf, size_t cap, int64_t step, const char *what) {
    Odl__Envelope e = ODL__ENVELOPE__INIT;
    Odl__Heartbeat hb = ODL__HEARTBEAT__INIT;
    hb.step = step;
    hb.epoch = 2;
    hb.samples_per_s = 1234.5;
    hb.collective_seq = 1842;
    hb.waiting_in = (char *)what;
    e.msg_case = ODL__ENVELOPE__MSG_HEARTBEAT;
    e.heartbeat = &hb;
    size_t len = 0;
    EXPECT(odl_wire_encode(&e, buf, cap, &len) == ODL_OK);
    return len;
}

static void test_round_trip(void) {
    uint8_t buf[256];
    size_t len = heartbeat_frame(buf, sizeof buf, 15, "allreduce bucket 3, seq 1842");
    EXPECT(len > 4 && buf[0] == 0 && buf[1] == 0 && (size_t)buf[3] + 4 == len);
    size_t used = 99;
    Odl__Envelope *e = NULL;
    EXPECT(odl_wire_decode(buf, len, &used, &e) == ODL_OK);
    EXPECT(e && used == len);
    if (e) {
        EXPECT(e->msg_case == ODL__ENVELOPE__MSG_HEARTBEAT && e->heartbeat->step == 15 &&
               e->heartbeat->collective_seq == 1842 && e->heartbeat->samples_per_s == 1234.5 &&
               !strcmp(e->heartbeat->waiting_in, "allreduce bucket 3, seq 1842"));
        EXPECT(!strcmp(odl_wire_msg_name(e->msg_case), "heartbeat"));
    }
    odl_wire_free(e);
    /* Every proper prefix is "not complete yet", never an error or a message. */
    for (size_t k = 0; k < len; k++) {
        e = NULL;
        EXPECT(odl_wire_decode(buf, k, &used, &e) == ODL_OK && !e && used == 0);
    }
    /* Two messages in one buffer: the first, then the second from where the first ended. */
    uint8_t two[512];
    size_t l1 = heartbeat_frame(two, sizeof two, 1, "");
    size_t l2 = heartbeat_frame(two + l1, sizeof two - l1, 2, "x");
    EXPECT(odl_wire_decode(two, l1 + l2, &used, &e) == ODL_OK && e && used == l1 && e->heartbeat->step == 1);
    odl_wire_free(e);
    EXPECT(odl_wire_decode(two + l1, l2, &used, &e) == ODL_OK && e && used == l2 && e->heartbeat->step == 2);
    odl_wire_free(e);
    /* A message that does not fit the output buffer. */
    EXPECT(odl_wire_encode(&(Odl__Envelope)ODL__ENVELOPE__INIT, buf, 3, &len) == ODL_E_INVAL);
}

/* The evaluation work queue's messages survive the codec with every field. */
static void test_work_messages(void) {
    uint8_t buf[1024];
    size_t len = 0, used = 0;
    Odl__Envelope e = ODL__ENVELOPE__INIT, *d = NULL;
    Odl__WorkItem w = ODL__WORK_ITEM__INIT;
    w.chunk = 157;
    w.first = 5024;
    w.count = 8;
    w.dir = "/scratch/job/eval";
    w.backup = 1;
    w.retry_ms = 100;
    w.n_chunks = 158;
    e.msg_case = ODL__ENVELOPE__MSG_WORK_ITEM;
    e.work_item = &w;
    EXPECT(odl_wire_encode(&e, buf, sizeof buf, &len) == ODL_OK);
    EXPECT(odl_wire_decode(buf, len, &used, &d) == ODL_OK && d && used == len);
    if (d) {
        const Odl__WorkItem *g = d->work_item;
        EXPECT(d->msg_case == ODL__ENVELOPE__MSG_WORK_ITEM && g->chunk == 157 && g->first == 5024 && g->count == 8 &&
               !strcmp(g->dir, "/scratch/job/eval") && g->backup && !g->finished && g->retry_ms == 100 &&
               g->n_chunks == 158 && !strcmp(g->error, ""));
        EXPECT(!strcmp(odl_wire_msg_name(d->msg_case), "work_item"));
    }
    odl_wire_free(d);
    Odl__Envelope r = ODL__ENVELOPE__INIT;
    Odl__WorkRequest q = ODL__WORK_REQUEST__INIT;
    q.key = "yolov5 weights=w.h5 images=5000";
    q.n_items = 5000;
    q.chunk_items = 32;
    r.msg_case = ODL__ENVELOPE__MSG_WORK_REQUEST;
    r.work_request = &q;
    EXPECT(odl_wire_encode(&r, buf, sizeof buf, &len) == ODL_OK);
    EXPECT(odl_wire_decode(buf, len, &used, &d) == ODL_OK && d && d->msg_case == ODL__ENVELOPE__MSG_WORK_REQUEST &&
           d->work_request->n_items == 5000 && d->work_request->chunk_items == 32 &&
           !strcmp(d->work_request->key, q.key));
    odl_wire_free(d);
    Odl__Envelope x = ODL__ENVELOPE__INIT;
    Odl__WorkDone k = ODL__WORK_DONE__INIT;
    k.chunk = 3;
    k.kept = 0;
    x.msg_case = ODL__ENVELOPE__MSG_WORK_DONE;
    x.work_done = &k;
    EXPECT(odl_wire_encode(&x, buf, sizeof buf, &len) == ODL_OK);
    EXPECT(odl_wire_decode(buf, len, &used, &d) == ODL_OK && d && d->msg_case == ODL__ENVELOPE__MSG_WORK_DONE &&
           d->work_done->chunk == 3 && !d->work_done->kept);
    odl_wire_free(d);
}

static void test_bad_frames(void) {
    size_t used;
    Odl__Envelope *e = NULL;
    uint8_t zero[8] = {0, 0, 0, 0, 1, 2, 3, 4};
    EXPECT(odl_wire_decode(zero, sizeof zero, &used, &e) == ODL_E_FORMAT && !e);
    EXPECT(strstr(odl_error_msg(), "length 0"));
    uint8_t huge[4] = {0x7F, 0xFF, 0xFF, 0xFF}; /* refused from the header alone */
    EXPECT(odl_wire_decode(huge, sizeof huge, &used, &e) == ODL_E_FORMAT && !e);
    EXPECT(strstr(odl_error_msg(), "exceeds the maximum"));
    uint8_t over[4] = {0, 1, 0, 1}; /* ODL_WIRE_MAX_FRAME + 1 */
    EXPECT(odl_wire_decode(over, sizeof over, &used, &e) == ODL_E_FORMAT);
    /* Field 1 (version) as an 11-byte varint: longer than protobuf's 10-byte maximum. */
    uint8_t varint[4 + 12] = {0, 0, 0, 12, 0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01};
    EXPECT(odl_wire_decode(varint, sizeof varint, &used, &e) == ODL_E_FORMAT && !e);
    /* Right framing, no message in the envelope; and a version from the future. */
    uint8_t nomsg[6] = {0, 0, 0, 2, 0x08, 0x01};
    EXPECT(odl_wire_decode(nomsg, sizeof nomsg, &used, &e) == ODL_E_FORMAT && strstr(odl_error_msg(), "without a message"));
    uint8_t v2[6] = {0, 0, 0, 2, 0x08, 0x02};
    EXPECT(odl_wire_decode(v2, sizeof v2, &used, &e) == ODL_E_FORMAT && strstr(odl_error_msg(), "protocol version 2"));
    /* A truncated submessage: the heartbeat's length says 10 bytes, 2 follow. */
    uint8_t trunc[8] = {0, 0, 0, 4, 0x3A, 10, 0x08, 0x01};
    EXPECT(odl_wire_decode(trunc, sizeof trunc, &used, &e) == ODL_E_FORMAT && !e);
    /* Random bytes: never a crash; any success consumed a whole frame. */
    srand(12345);
    uint8_t rnd[512];
    int decoded = 0;
    for (int it = 0; it < 20000; it++) {
        size_t n = 4 + (size_t)(rand() % 200);
        for (size_t i = 0; i < n; i++) rnd[i] = (uint8_t)rand();
        rnd[0] = rnd[1] = 0; /* lengths small enough to be tried, not refused from the header */
        rnd[2] = 0;
        rnd[3] = (uint8_t)(n - 4);
        e = NULL;
        odl_status s = odl_wire_decode(rnd, n, &used, &e);
        if (s == ODL_OK && e) {
            decoded++;
            EXPECT(used == n);
            odl_wire_free(e);
        }
    }
    printf("random frames: %d of 20000 decoded as envelopes\n", decoded);
}

static void test_mac(void) {
    uint8_t key[32], nonce[32], mac[32];
    for (int i = 0; i < 32; i++) key[i] = (uint8_t)i, nonce[i] = (uint8_t)(255 - i);
    odl_wire_mac(key, nonce, 1, 7, mac);
    EXPECT(odl_wire_mac_ok(key, nonce, 1, 7, mac, 32));
    EXPECT(!odl_wire_mac_ok(key, nonce, 2, 7, mac, 32)); /* another rank */
    EXPECT(!odl_wire_mac_ok(key, nonce, 1, 6, mac, 32)); /* another generation */
    EXPECT(!odl_wire_mac_ok(key, nonce, 1, 7, mac, 31));
    key[0] ^= 1;
    EXPECT(!odl_wire_mac_ok(key, nonce, 1, 7, mac, 32)); /* another secret */
}

static void test_fault_parse(void) {
    odl_fault_plan p;
    EXPECT(odl_fault_parse("kill@rank=1,step=15", &p) == ODL_OK && p.n == 1 && p.f[0].action == ODL_FAULT_KILL &&
           p.f[0].rank == 1 && p.f[0].step == 15);
    EXPECT(odl_fault_parse("hang@step=3,rank=0;exit@step=9", &p) == ODL_OK && p.n == 2 && p.f[0].action == ODL_FAULT_HANG &&
           p.f[0].rank == 0 && p.f[0].step == 3 && p.f[1].action == ODL_FAULT_EXIT && p.f[1].rank == -1);
    EXPECT(odl_fault_parse("", &p) == ODL_OK && p.n == 0);
    EXPECT(odl_fault_parse("slow@rank=0,step=0,ms=50", &p) == ODL_OK && p.n == 1 && p.f[0].action == ODL_FAULT_SLOW &&
           p.f[0].ms == 50);
    EXPECT(odl_fault_parse("stop@rank=1,step=1", &p) == ODL_OK && p.n == 1 && p.f[0].action == ODL_FAULT_STOP &&
           p.f[0].rank == 1 && p.f[0].step == 1 && !strcmp(p.f[0].name, "stop"));
    EXPECT(odl_fault_parse("explode@rank=1,step=2", &p) == ODL_E_CONFIG && strstr(odl_error_msg(), "unknown action"));
    EXPECT(odl_fault_parse("kill@rank=1", &p) == ODL_E_CONFIG && strstr(odl_error_msg(), "needs step"));
    EXPECT(odl_fault_parse("kill@rank=x,step=2", &p) == ODL_E_CONFIG);
    EXPECT(odl_fault_parse("kill@node=a,step=2", &p) == ODL_E_CONFIG && strstr(odl_error_msg(), "unknown key"));
    EXPECT(odl_fault_parse("kill", &p) == ODL_E_CONFIG);
}

int main(void) {
    test_round_trip();
    test_bad_frames();
    test_mac();
    test_fault_parse();
    test_work_messages();
    if (fails) {
        fprintf(stderr, "%d check(s) failed\n", fails);
        return 1;
    }
    printf("coord wire: all checks passed\n");
    return 0;
}
