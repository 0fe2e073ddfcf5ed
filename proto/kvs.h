/* proto: learn which ranks "have the marker" through the launcher's
 * key-value store, written before MPI_Init and read after it. */
#ifndef PROTO_KVS_H
#define PROTO_KVS_H
/* Before MPI_Init: put the marker (returns 0 when a store was reached). */
int kvs_put_marker(void);
/* After MPI_Init: has[r] = 1 when rank r put it, 0 when not, -1 unknown.
 * Returns 0 when the store answered for every rank. */
int kvs_read_markers(int size, int *has);
void kvs_done(void);
const char *kvs_name(void);
#endif
