/* The records of PSA's lazy state (_lazy_records.pxd): the one table of
 * their layout, read by the Cython code (Layout, block_at, record_dtype),
 * by _binary_gaps.h (through Layout's offsets) and by the prefetch macros.
 *
 * A block of w weights is one record: the time `last` it is current at (8
 * bytes), then its fields, each w wide, field f at byte 8 + SKSO_AT_f * w:
 * those every touch reads first (v, eta), then those of the events (dsnap,
 * snap), then, with the L1 penalty, what each weight is owed.
 */
#ifndef SKSO_LAZY_RECORDS_H
#define SKSO_LAZY_RECORDS_H

#define SKSO_LAST_BYTES 8
#define SKSO_AT_V 0          /* double */
#define SKSO_AT_ETA 8        /* float */
#define SKSO_AT_DSNAP 12     /* float */
#define SKSO_AT_SNAP 16      /* double */
#define SKSO_AT_OWED_DOWN 24 /* double, with L1 */
#define SKSO_AT_OWED_UP 32   /* double, with L1 */
/* the bytes a weight takes in a record, without and with the L1 fields */
#define SKSO_WEIGHT_BYTES 24
#define SKSO_WEIGHT_BYTES_L1 40

/* Layout.record_at: a held block's record offset << 20 | its width */
#define SKSO_HELD_WIDTH_BITS 20
#define SKSO_HELD_WIDTH_MASK ((1LL << SKSO_HELD_WIDTH_BITS) - 1)

#endif
