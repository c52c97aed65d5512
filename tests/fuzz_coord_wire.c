/* libFuzzer target for the coordinator's frame decoder (comm/coord_wire.h): any bytes give a message
 * that consumed a whole frame, "need more", or an error; never a crash or a leak. The input is fed
 * as a stream, frame after frame, as the coordinator does. */
#include <stddef.h>
#include <stdint.h>

#include "comm/coord_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t off = 0;
    while (off < size) {
        size_t used = 0;
        Odl__Envelope *e = NULL;
        if (odl_wire_decode(data + off, size - off, &used, &e) != ODL_OK || !e) break;
        if (used == 0 || used > size - off) __builtin_trap();
        (void)odl_wire_msg_name(e->msg_case);
        odl_wire_free(e);
        off += used;
    }
    return 0;
}
