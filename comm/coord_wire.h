/* The coordinator's wire (docs/coordinator.md "Protocol"): frames of a 4-byte big-endian length and one
 * protobuf-c Envelope (proto/odl.proto), and the job secret's challenge-response HMAC. One piece of
 * code for the format, used by the coordinator (coordinator/) and the worker's client
 * (comm/coord_client.c). Internal to the project: not installed. */
#ifndef ODL_COMM_COORD_WIRE_H
#define ODL_COMM_COORD_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "odl/status.h"
#include "proto/odl.pb-c.h"

#define ODL_WIRE_VERSION 1u
/* Largest Envelope accepted or sent, in bytes (the length prefix excluded). Messages are small (the
 * largest carries a path); a bigger length is refused before any byte of it is buffered. */
#define ODL_WIRE_MAX_FRAME 65536u
#define ODL_WIRE_HEADER 4u
#define ODL_WIRE_NONCE_BYTES 32u
#define ODL_WIRE_MAC_BYTES 32u /* crypto_auth_BYTES */
#define ODL_WIRE_KEY_BYTES 32u /* crypto_auth_KEYBYTES */
/* The heartbeat interval odl_coordinator gives (--heartbeat-ms), and a worker's when a Welcome has none. */
#define ODL_WIRE_HEARTBEAT_S_DEFAULT 0.2

/* Decode the first frame of buf[0..len). A pure function of its input:
 *   ODL_OK, *out != NULL, *consumed = bytes of the frame: one Envelope (free with odl_wire_free);
 *   ODL_OK, *out == NULL, *consumed = 0: the frame is not complete yet (read more);
 *   ODL_E_FORMAT: a length of 0 or over ODL_WIRE_MAX_FRAME (known from the first 4 bytes), bytes that
 *   are not an Envelope, a protocol version other than ODL_WIRE_VERSION, no message set. The stream
 *   cannot be resynchronised after an error: close the connection. */
odl_status odl_wire_decode(const uint8_t *buf, size_t len, size_t *consumed, Odl__Envelope **out);
void odl_wire_free(Odl__Envelope *e);
/* Encode e (its version is set here) with its length prefix into buf[0..cap); *len = bytes written.
 * ODL_E_INVAL when the message exceeds ODL_WIRE_MAX_FRAME or cap. */
odl_status odl_wire_encode(Odl__Envelope *e, uint8_t *buf, size_t cap, size_t *len);
/* Short name of the envelope's message ("hello", "heartbeat", ...). */
const char *odl_wire_msg_name(int msg_case);

/* The job key: crypto_generichash (BLAKE2b, 32 bytes) of the secret file's bytes, so that any token
 * file works. Errors: unreadable or empty file; a file readable by group or others (ODL_E_INVAL). */
odl_status odl_wire_key_load(const char *path, uint8_t key[ODL_WIRE_KEY_BYTES]);
/* The proof of a worker: crypto_auth (HMAC-SHA-512-256, libsodium) of nonce || rank (4 bytes BE) ||
 * generation (8 bytes BE). Binding rank and generation stops a proof being replayed for another. */
void odl_wire_mac(const uint8_t key[ODL_WIRE_KEY_BYTES], const uint8_t nonce[ODL_WIRE_NONCE_BYTES], uint32_t rank,
                  uint64_t generation, uint8_t mac[ODL_WIRE_MAC_BYTES]);
/* 1 when mac is the proof for (nonce, rank, generation); compared in constant time (crypto_verify_32). */
int odl_wire_mac_ok(const uint8_t key[ODL_WIRE_KEY_BYTES], const uint8_t nonce[ODL_WIRE_NONCE_BYTES], uint32_t rank,
                    uint64_t generation, const uint8_t *mac, size_t mac_len);

#endif
