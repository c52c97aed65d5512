/* Frame codec and job-secret HMAC of the coordinator's wire (comm/coord_wire.h). */
#ifdef ODL_HAVE_COORDINATOR
#include "comm/coord_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

odl_status odl_wire_decode(const uint8_t *buf, size_t len, size_t *consumed, Odl__Envelope **out) {
    *consumed = 0;
    *out = NULL;
    if (len < ODL_WIRE_HEADER) return ODL_OK;
    uint32_t n = (uint32_t)buf[0] << 24 | (uint32_t)buf[1] << 16 | (uint32_t)buf[2] << 8 | (uint32_t)buf[3];
    if (n == 0) return ODL_ERR(ODL_E_FORMAT, "frame of length 0");
    if (n > ODL_WIRE_MAX_FRAME)
        return ODL_ERR(ODL_E_FORMAT, "frame of %u bytes exceeds the maximum of %u", n, ODL_WIRE_MAX_FRAME);
    if (len - ODL_WIRE_HEADER < n) return ODL_OK;
    Odl__Envelope *e = odl__envelope__unpack(NULL, n, buf + ODL_WIRE_HEADER);
    if (!e) return ODL_ERR(ODL_E_FORMAT, "frame of %u bytes is not an odl.Envelope", n);
    if (e->version != ODL_WIRE_VERSION) {
        uint32_t v = e->version;
        odl__envelope__free_unpacked(e, NULL);
        return ODL_ERR(ODL_E_FORMAT, "protocol version %u, this build speaks %u", v, ODL_WIRE_VERSION);
    }
    if (e->msg_case == ODL__ENVELOPE__MSG__NOT_SET) {
        odl__envelope__free_unpacked(e, NULL);
        return ODL_ERR(ODL_E_FORMAT, "envelope without a message (unknown to protocol version %u?)", ODL_WIRE_VERSION);
    }
    *consumed = ODL_WIRE_HEADER + n;
    *out = e;
    return ODL_OK;
}

void odl_wire_free(Odl__Envelope *e) {
    if (e) odl__envelope__free_unpacked(e, NULL);
}

odl_status odl_wire_encode(Odl__Envelope *e, uint8_t *buf, size_t cap, size_t *len) {
    e->version = ODL_WIRE_VERSION;
    size_t n = odl__envelope__get_packed_size(e);
    if (n > ODL_WIRE_MAX_FRAME || n + ODL_WIRE_HEADER > cap)
        return ODL_ERR(ODL_E_INVAL, "%s message of %zu bytes does not fit a frame (max %u, buffer %zu)",
                       odl_wire_msg_name(e->msg_case), n, ODL_WIRE_MAX_FRAME, cap);
    buf[0] = (uint8_t)(n >> 24);
    buf[1] = (uint8_t)(n >> 16);
    buf[2] = (uint8_t)(n >> 8);
    buf[3] = (uint8_t)n;
    odl__envelope__pack(e, buf + ODL_WIRE_HEADER);
    *len = n + ODL_WIRE_HEADER;
    return ODL_OK;
}

const char *odl_wire_msg_name(int c) {
    switch (c) {
    case ODL__ENVELOPE__MSG_HELLO: return "hello";
    case ODL__ENVELOPE__MSG_CHALLENGE: return "challenge";
    case ODL__ENVELOPE__MSG_PROOF: return "proof";
    case ODL__ENVELOPE__MSG_WELCOME: return "welcome";
    case ODL__ENVELOPE__MSG_REFUSED: return "refused";
    case ODL__ENVELOPE__MSG_HEARTBEAT: return "heartbeat";
    case ODL__ENVELOPE__MSG_CHECKPOINT_AT: return "checkpoint_at";
    case ODL__ENVELOPE__MSG_CHECKPOINT_CANCEL: return "checkpoint_cancel";
    case ODL__ENVELOPE__MSG_CHECKPOINT_ACK: return "checkpoint_ack";
    case ODL__ENVELOPE__MSG_CHECKPOINT_WRITTEN: return "checkpoint_written";
    case ODL__ENVELOPE__MSG_XID_REPORT: return "xid_report";
    case ODL__ENVELOPE__MSG_GOODBYE: return "goodbye";
    case ODL__ENVELOPE__MSG_SHUTDOWN: return "shutdown";
    case ODL__ENVELOPE__MSG_WORK_REQUEST: return "work_request";
    case ODL__ENVELOPE__MSG_WORK_ITEM: return "work_item";
    case ODL__ENVELOPE__MSG_WORK_DONE: return "work_done";
    default: return "none";
    }
}

odl_status odl_wire_key_load(const char *path, uint8_t key[ODL_WIRE_KEY_BYTES]) {
    if (sodium_init() < 0) return ODL_ERR(ODL_E_INTERNAL, "libsodium could not be initialised");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ODL_ERR(ODL_E_IO, "job secret %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || (sb.st_mode & 077)) {
        close(fd);
        return ODL_ERR(ODL_E_INVAL, "job secret %s is readable by group or others (mode %03o): chmod 600 it", path,
                       (unsigned)(sb.st_mode & 0777));
    }
    uint8_t buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    int e = errno;
    close(fd);
    if (n < 0) return ODL_ERR(ODL_E_IO, "job secret %s: %s", path, strerror(e));
    if (n == 0) return ODL_ERR(ODL_E_INVAL, "job secret %s is empty", path);
    crypto_generichash(key, ODL_WIRE_KEY_BYTES, buf, (unsigned long long)n, NULL, 0);
    sodium_memzero(buf, sizeof buf);
    return ODL_OK;
}

void odl_wire_mac(const uint8_t key[ODL_WIRE_KEY_BYTES], const uint8_t nonce[ODL_WIRE_NONCE_BYTES], uint32_t rank,
                  uint64_t generation, uint8_t mac[ODL_WIRE_MAC_BYTES]) {
    uint8_t m[ODL_WIRE_NONCE_BYTES + 12];
    memcpy(m, nonce, ODL_WIRE_NONCE_BYTES);
    for (int i = 0; i < 4; i++) m[ODL_WIRE_NONCE_BYTES + i] = (uint8_t)(rank >> (24 - 8 * i));
    for (int i = 0; i < 8; i++) m[ODL_WIRE_NONCE_BYTES + 4 + i] = (uint8_t)(generation >> (56 - 8 * i));
    crypto_auth(mac, m, sizeof m, key);
}

int odl_wire_mac_ok(const uint8_t key[ODL_WIRE_KEY_BYTES], const uint8_t nonce[ODL_WIRE_NONCE_BYTES], uint32_t rank,
                    uint64_t generation, const uint8_t *mac, size_t mac_len) {
    if (!mac || mac_len != ODL_WIRE_MAC_BYTES) return 0;
    uint8_t want[ODL_WIRE_MAC_BYTES];
    odl_wire_mac(key, nonce, rank, generation, want);
    return crypto_verify_32(want, mac) == 0;
}
#endif
