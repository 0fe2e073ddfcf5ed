/*
 * collar - one MPI_Allreduce of floats (sum) per size given on the command
 * line, in bytes (K, M suffixes), with the result checked on every rank.
 * tune.test runs it under a table made by collar-tune and reads collar's
 * log to see which rule each size got.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    switch (*end) {
    case 'K': case 'k': v <<= 10; break;
    case 'M': case 'm': v <<= 20; break;
    case 'G': case 'g': v <<= 30; break;
    default: break;
    }
    return (size_t)v;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int a = 1; a < argc; a++) {
        size_t bytes = parse_size(argv[a]);
        int count = (int)(bytes / sizeof(float));
        float *s = malloc((size_t)count * sizeof(float) + 1);
        float *r = malloc((size_t)count * sizeof(float) + 1);
        if (s == NULL || r == NULL) {
            fprintf(stderr, "test_tune_sizes: out of memory\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (int i = 0; i < count; i++) {
            s[i] = (float)(rank + 1);
            r[i] = -1;
        }
        MPI_Allreduce(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        for (int i = 0; i < count; i++) {
            if (r[i] != (float)(size * (size + 1) / 2)) {
                bad++;
                break;
            }
        }
        free(s);
        free(r);
    }
    int all = 0;
    MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("test_tune_sizes: %d size%s on %d ranks: %s\n", argc - 1,
               argc == 2 ? "" : "s", size, all ? "WRONG RESULTS" : "results correct");
    }
    MPI_Finalize();
    return all ? 1 : 0;
}
