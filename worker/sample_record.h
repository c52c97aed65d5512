/* Test hooks of odl_worker --task=train on the data a step trains on (bench/soak.sh reads them):
 *
 * ODL_SAMPLE_RECORD=PREFIX: every rank appends one line per optimiser step it takes to
 *   PREFIX.gen<G>.rank<R>.txt   (G: ODL_COORD_GENERATION, 0 without a coordinator)
 *   "<step> <epoch> <cursor> <world> <local> <idx>..."   step after the update (1 = the first), epoch
 *   0-based, the global sample cursor at the step's start, world size, then the data-set indices of this
 *   rank's rows as the loader gathered them (odl_batch.idx). Each line is written with one write(2) after
 *   the update, so a rank killed after a step leaves it complete in the file (the kernel keeps it).
 *
 * ODL_SAMPLE_TEST_LOSE_AT_STEP=S: a planted bug: rank 0 trains step S without the last sample of its
 *   batch (it is in no gradient and no record line), every run. bench/soak.sh --plant lose-sample uses
 *   it to show that its exactly-once check catches a lost sample. */
#ifndef ODL_WORKER_SAMPLE_RECORD_H
#define ODL_WORKER_SAMPLE_RECORD_H

#include <stdint.h>

#include "odl/loader.h"
#include "odl/status.h"

typedef struct odl_sample_record {
    int fd;            /* -1: not recording */
    int rank;
    int64_t lose_step; /* ODL_SAMPLE_TEST_LOSE_AT_STEP, -1: none */
    /* the step kept by odl_sample_record_keep, written by odl_sample_record_step */
    int64_t epoch, cursor;
    int local, cap;
    int64_t *idx; /* [cap] */
} odl_sample_record;

/* From the environment, for per-rank batches of at most `batch`; opens the rank's file for appending
 * (one file per generation and rank: a relaunch never writes into its predecessor's). Errors: ODL_E_IO
 * naming the file, ODL_E_NOMEM. */
odl_status odl_sample_record_open(odl_sample_record *r, int rank, int batch);
/* Before the step that will be number `step`: the planted loss (b->local one lower) when due. */
void odl_sample_record_plant(odl_sample_record *r, odl_batch *b, int64_t step);
/* What the line of b's step needs (epoch, cursor, its rows' indices), before b goes back to the loader. */
void odl_sample_record_keep(odl_sample_record *r, const odl_batch *b);
/* After the update of step `step`: its line. Errors: ODL_E_IO. */
odl_status odl_sample_record_step(odl_sample_record *r, int64_t step, int world);
void odl_sample_record_close(odl_sample_record *r);

#endif
