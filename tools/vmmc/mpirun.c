/* `vmmc mpirun [--print] [mpirun options] prog [args]`: Open MPI's mpirun,
 * with the options that make an unmodified MPI program run over the
 * libfabric provider "vmmc":
 *
 *   --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include vmmc
 *       point-to-point through the ofi MTL, which may use no provider but
 *       vmmc: if the provider cannot be used, MPI_Init fails (no fallback);
 *   --mca btl self,ofi --mca btl_ofi_provider_include vmmc
 *       one-sided windows (osc rdma) over the provider's RMA and atomics,
 *       through Open MPI's btl ofi, which may use no provider but vmmc;
 *   -x FI_PROVIDER_PATH=<where libvmmc-fi.so is> and every VMMC_* / FI_*
 *       variable of this environment, so that ranks on other hosts see them;
 *   --allow-run-as-root when run as root (as Open MPI would refuse).
 *
 * The provider is found relative to this program (fi_where.c). The options
 * given are appended after these. Open MPI refuses a parameter given twice
 * on its command line, so where the user's options set one of ours
 * (--mca NAME / -mca NAME), ours is left out: the user's wins. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmds.h"
#include "fi_where.h"

extern char **environ;

static void mpirun_usage(FILE *f)
{
    fprintf(f,
            "usage: vmmc mpirun [--print] [mpirun options] prog [args...]\n"
            "\n"
            "Run an MPI program built with Open MPI's mpicc over vmmc: exec Open MPI's\n"
            "mpirun with the libfabric provider \"vmmc\" as the only path for point-to-point\n"
            "messages (--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include vmmc) and\n"
            "one-sided windows (--mca btl self,ofi --mca btl_ofi_provider_include vmmc),\n"
            "and FI_PROVIDER_PATH set to the directory of libvmmc-fi.so (found next to\n"
            "this program: <build>/fi, or <libdir>/libfabric when installed). Every\n"
            "VMMC_* and FI_* variable is passed to the ranks (-x), so\n"
            "`VMMC_TRANSPORT=udp vmmc mpirun -np 2 ./prog` runs over udp. Options after\n"
            "`mpirun` go to mpirun unchanged, after ours; an --mca NAME of ours that they\n"
            "also set is left out (theirs wins).\n"
            "\n"
            "options:\n"
            "  --print     print the command instead of running it\n"
            "  -h, --help  this text\n"
            "\n"
            "example: vmmc mpirun -np 2 --oversubscribe ./ring\n");
}

/* Open MPI's mpirun: mpirun.openmpi (Debian), else an mpirun that is not
 * MPICH's. 0 with its name in @out, or -1 with a message. */
static int find_mpirun(char *out, size_t n)
{
    static const char *const names[] = {"mpirun.openmpi", "mpirun"};
    const char *path = getenv("PATH");
    for (size_t i = 0; i < 2; i++) {
        char buf[PATH_MAX];
        const char *p = path ? path : "/usr/bin:/bin";
        while (*p) {
            size_t l = strcspn(p, ":");
            if (l && (size_t)snprintf(buf, sizeof buf, "%.*s/%s", (int)l, p, names[i]) <
                         sizeof buf &&
                access(buf, X_OK) == 0) {
                char real[PATH_MAX];
                if (realpath(buf, real) && (strstr(real, "mpich") || strstr(real, "hydra"))) {
                    fprintf(stderr, "vmmc mpirun: %s is MPICH's (%s); the provider is used "
                            "through Open MPI's mpirun (apt-get install -y openmpi-bin)\n",
                            buf, real);
                    return -1;
                }
                snprintf(out, n, "%s", buf);
                return 0;
            }
            p += l;
            if (*p == ':')
                p++;
        }
    }
    fprintf(stderr, "vmmc mpirun: Open MPI's mpirun is not in PATH "
            "(apt-get install -y openmpi-bin)\n");
    return -1;
}

/* Do the user's arguments set mca parameter @name? */
static int user_sets(char **argv, int first, int argc, const char *name)
{
    for (int i = first; i + 1 < argc; i++)
        if ((!strcmp(argv[i], "--mca") || !strcmp(argv[i], "-mca")) && !strcmp(argv[i + 1], name))
            return 1;
    return 0;
}

/* Print @s quoted for a POSIX shell when it needs to be. */
static void print_word(const char *s)
{
    if (*s && !s[strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                           "-_./=:,+@%^")]) {
        fputs(s, stdout);
        return;
    }
    putchar('\'');
    for (; *s; s++)
        if (*s == '\'')
            fputs("'\\''", stdout);
        else
            putchar(*s);
    putchar('\'');
}

int vmmc_cmd_mpirun(int argc, char **argv)
{
    int first = 1, print = 0;
    for (; first < argc; first++) {
        if (!strcmp(argv[first], "--print")) {
            print = 1;
        } else if (!strcmp(argv[first], "-h") || !strcmp(argv[first], "--help")) {
            mpirun_usage(stdout);
            return 0;
        } else {
            break;
        }
    }
    if (first == argc) {
        fprintf(stderr, "vmmc mpirun: no program given\n");
        mpirun_usage(stderr);
        return 2;
    }
    char dir[2 * PATH_MAX + 8], mpirun[PATH_MAX];
    if (vmmc_fi_dir(dir, sizeof dir)) {
        fprintf(stderr, "vmmc mpirun: the libfabric provider %s is not built or installed "
                "(looked in %s); build with libfabric's headers installed "
                "(apt-get install -y libfabric-dev)\n", VMMC_FI_LIB, dir);
        return 1;
    }
    if (find_mpirun(mpirun, sizeof mpirun))
        return 1;
    /* FI_PROVIDER_PATH: ours first, then what was there */
    const char *old = getenv("FI_PROVIDER_PATH");
    size_t plen = strlen(dir) + (old ? strlen(old) + 1 : 0) + 1;
    char *fpp = malloc(plen);
    if (!fpp) {
        fprintf(stderr, "vmmc mpirun: out of memory\n");
        return 1;
    }
    snprintf(fpp, plen, "%s%s%s", dir, old && *old ? ":" : "", old && *old ? old : "");
    if (setenv("FI_PROVIDER_PATH", fpp, 1)) {
        perror("vmmc mpirun: setenv");
        free(fpp);
        return 1;
    }
    free(fpp);
    size_t nenv = 0;
    for (char **e = environ; *e; e++)
        nenv++;
    char **av = calloc(32 + 2 * nenv + (size_t)argc, sizeof *av);
    char **names = calloc(nenv + 1, sizeof *names);
    if (!av || !names) {
        fprintf(stderr, "vmmc mpirun: out of memory\n");
        free(av);
        free(names);
        return 1;
    }
    int n = 0, root = geteuid() == 0;
    for (int i = first; i < argc && root; i++)
        if (!strcmp(argv[i], "--allow-run-as-root"))
            root = 0;
    av[n++] = mpirun;
    if (root)
        av[n++] = "--allow-run-as-root";
    static const char *const mca[][2] = {
        {"pml", "cm"}, {"mtl", "ofi"}, {"mtl_ofi_provider_include", "vmmc"},
        {"btl", "self,ofi"}, {"btl_ofi_provider_include", "vmmc"}};
    for (size_t i = 0; i < sizeof mca / sizeof *mca; i++) {
        if (user_sets(argv, first, argc, mca[i][0]))
            continue;
        av[n++] = "--mca";
        av[n++] = (char *)mca[i][0];
        av[n++] = (char *)mca[i][1];
    }
    /* -x NAME passes this environment's value to every rank */
    size_t k = 0;
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, "VMMC_", 5) && strncmp(*e, "FI_", 3))
            continue;
        size_t l = strcspn(*e, "=");
        names[k] = strndup(*e, l);
        if (!names[k])
            continue;
        av[n++] = "-x";
        av[n++] = names[k++];
    }
    for (int i = first; i < argc; i++)
        av[n++] = argv[i];
    av[n] = NULL;
    if (print) {
        printf("FI_PROVIDER_PATH=");
        print_word(getenv("FI_PROVIDER_PATH"));
        for (int i = 0; i < n; i++) {
            putchar(' ');
            print_word(av[i]);
        }
        putchar('\n');
        for (size_t i = 0; i < k; i++)
            free(names[i]);
        free(names);
        free(av);
        return 0;
    }
    fflush(stdout);
    execv(mpirun, av);
    fprintf(stderr, "vmmc mpirun: cannot run %s: %m\n", mpirun);
    return 127;
}
