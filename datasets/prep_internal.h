/* Pieces shared by the CPU image pipeline (datasets/pipeline.c) and the device one (datasets/gpu_prep.c).
 * Private to datasets/. */
#ifndef ODL_DATASETS_PREP_INTERNAL_H
#define ODL_DATASETS_PREP_INTERNAL_H

#include "odl/pipeline.h"

/* The plan of job for an image of w x h pixels (EXIF orientation applied), val.py's load_image then
 * letterbox (odl/pipeline.h): *w1 x *h1 after the load_size resize (w x h when there is none), and into
 * res the sizes, the letterbox geometry from w1 x h1, gain and pad (status, err and decoder untouched).
 * Errors: ODL_E_INVAL from the geometry, ODL_E_INTERNAL when it does not give the job's out_w x out_h. */
odl_status odl_prep_plan(const odl_prep_job *job, int w, int h, odl_prep_result *res, int *w1, int *h1);

#endif
