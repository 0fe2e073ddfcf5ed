/* Open MPI 5: PMIx_Init called before MPI_Init (as collar first tried) makes
 * MPI_Init fail ("local rank ... Not found"): ompi_rte_init skips its own
 * PMIx_Init where PMIx_Initialized() and has no process name then.
 *   DOMPI=1 mpirun -np 1 ./ompi5_init_first */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <mpi.h>
typedef struct { char nspace[256]; uint32_t rank; } px_proc_t;
typedef struct { uint16_t type; union { bool flag; uint32_t u32; uint16_t u16; int i; char *s; uint8_t pad[24]; } data; } px_value_t;
typedef struct { char key[512]; uint32_t flags; px_value_t value; } px_info_t;
int main(int argc, char **argv){
    void *h = dlopen("libpmix.so.2", RTLD_NOW | RTLD_GLOBAL);
    int (*p_init)(px_proc_t *, px_info_t *, size_t) = dlsym(h, "PMIx_Init");
    int (*p_get)(const px_proc_t *, const char *, const px_info_t *, size_t, px_value_t **) = dlsym(h, "PMIx_Get");
    px_proc_t me; px_info_t info; memset(&info,0,sizeof info); strcpy(info.key,"pmix.optional"); info.value.type=1; info.value.data.flag=true;
    int ninfo = getenv("NINFO") ? atoi(getenv("NINFO")) : 0;
    int rc = p_init(&me, NULL, 0);
    px_value_t *v=NULL;
    int rc2 = p_get(&me, "pmix.lrank", ninfo ? &info : NULL, ninfo, &v);
    fprintf(stderr, "init %d ns %s rank %u; get lrank %d type %d val %u\n", rc, me.nspace, me.rank, rc2, v?v->type:-1, v?v->data.u16:0);
    rc = p_init(&me, NULL, 0);
    rc2 = p_get(&me, "pmix.lrank", ninfo ? &info : NULL, ninfo, &v);
    fprintf(stderr, "init2 %d; get lrank %d\n", rc, rc2);
    if (getenv("DOMPI")) { MPI_Init(&argc,&argv); fprintf(stderr,"mpi ok\n"); MPI_Finalize(); }
    return 0;
}
