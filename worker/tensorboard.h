/* --tensorboard DIR: scalars in a TensorBoard event file, DIR/events.out.tfevents.<unix time>.<host>.<pid>,
 * as torch.utils.tensorboard.SummaryWriter writes them: TFRecords (length, masked CRC-32C of the length,
 * a serialised tensorboard.Event, masked CRC-32C of it) whose first Event has file_version
 * "brain.Event:2" and the others one Summary value each (tag, simple_value). Events are serialised with
 * protobuf-c from the subsets in proto/tensorboard/. */
#ifndef ODL_WORKER_TENSORBOARD_H
#define ODL_WORKER_TENSORBOARD_H

#include <stddef.h>
#include <stdint.h>

#include "odl/status.h"

typedef struct odl_tb_writer odl_tb_writer;

/* Create DIR (and its parents) if needed and open a new event file there. Errors: ODL_E_IO,
 * ODL_E_UNSUPPORTED (a build without protobuf-c). */
odl_status odl_tb_open(const char *dir, odl_tb_writer **out);
/* One scalar at a global step (flushed, so TensorBoard sees it while training runs). A non-finite value
 * is skipped. Errors: ODL_E_IO. */
odl_status odl_tb_scalar(odl_tb_writer *w, const char *tag, int64_t step, double value);
/* Close the file (NULL is fine). */
void odl_tb_close(odl_tb_writer *w);
const char *odl_tb_path(const odl_tb_writer *w);

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord uses; and TFRecord's mask
 * ((crc >> 15 | crc << 17) + 0xa282ead8). Written here: no installed library has CRC-32C (zlib's crc32
 * is the IEEE polynomial). Check value: odl_crc32c("123456789", 9) == 0xE3069283. */
uint32_t odl_crc32c(const void *data, size_t n);
uint32_t odl_tfrecord_mask(uint32_t crc);

#endif
