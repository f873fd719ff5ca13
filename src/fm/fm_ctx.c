/* Handler contexts: a handler that must wait inside fm_receive() runs on a
 * stack of its own, so it can be suspended and resumed where it left off.
 *
 * Stacks come from a pool and are kept after use: at most one handler per
 * sender is in progress, so the pool never holds more than one stack per rank
 * and steady state allocates nothing. Each context runs a loop: run the
 * assigned handler, mark itself finished, switch back; resuming a finished
 * context starts its next handler without re-initialising anything.
 *
 * The switch on x86-64 is a few instructions that save the callee-saved
 * registers and the SSE/x87 control words (no signal mask, so no system
 * call, unlike swapcontext); other architectures and sanitizer builds use
 * ucontext. */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fm/fm_int.h"

#if defined(__x86_64__) && !defined(VMMC_SANITIZE)
#define FM_ASM_SWITCH 1
#else
#include <ucontext.h>
#endif

struct fm_ctx {
    void *sp;
    char *stack;   /* mmap'd, lowest page is a guard */
    size_t len;
    struct fm *fm;
    fm_peer_t *peer;
    fm_handler_t fn;
    void *arg;
    int finished;
    fm_ctx_t *next_free;
    fm_ctx_t *next_all;
#ifndef FM_ASM_SWITCH
    ucontext_t uc;
    ucontext_t *back;
#endif
};

#ifdef FM_ASM_SWITCH
/* void fm_ctx_switch(void **save_sp, void *new_sp) */
void fm_ctx_switch(void **save_sp, void *new_sp);
void fm_ctx_boot(void);
__asm__(".text\n"
        ".globl fm_ctx_switch\n"
        ".hidden fm_ctx_switch\n"
        ".type fm_ctx_switch,@function\n"
        "fm_ctx_switch:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  subq $8, %rsp\n"
        "  stmxcsr (%rsp)\n"
        "  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n"
        "  fldcw 4(%rsp)\n"
        "  addq $8, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size fm_ctx_switch, .-fm_ctx_switch\n"
        ".globl fm_ctx_boot\n"
        ".hidden fm_ctx_boot\n"
        ".type fm_ctx_boot,@function\n"
        "fm_ctx_boot:\n"
        "  movq %r12, %rdi\n"
        "  callq *%r13\n"
        "  ud2\n"
        ".size fm_ctx_boot, .-fm_ctx_boot\n");
#endif

static void ctx_main(fm_ctx_t *c)
{
    for (;;) {
        c->fn(&c->peer->rs, c->peer->rank, c->arg);
        c->finished = 1;
        fm_ctx_yield(c->fm);
    }
}

#ifndef FM_ASM_SWITCH
static void ctx_main_uc(unsigned hi, unsigned lo)
{
    ctx_main((fm_ctx_t *)(((uintptr_t)hi << 32) | (uintptr_t)lo));
}
#endif

static int ctx_new(struct fm *fm, fm_ctx_t **out)
{
    long pg = sysconf(_SC_PAGESIZE);
    size_t len = (fm->stack_size + (size_t)pg - 1) & ~((size_t)pg - 1);
    fm_ctx_t *c = calloc(1, sizeof *c);
    if (!c)
        return vmmc_error(VMMC_ERR_NOMEM, "fm: no memory for a handler context");
    c->len = len + (size_t)pg;
    c->stack = mmap(NULL, c->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK,
                    -1, 0);
    if (c->stack == MAP_FAILED) {
        free(c);
        return vmmc_error(VMMC_ERR_NOMEM, "fm: cannot map a %zu-byte handler stack: %m", len);
    }
    if (mprotect(c->stack, (size_t)pg, PROT_NONE) != 0) {
        munmap(c->stack, c->len);
        free(c);
        return vmmc_error_sys("fm: mprotect of a handler stack's guard page");
    }
    c->fm = fm;
#ifdef FM_ASM_SWITCH
    uintptr_t top = ((uintptr_t)c->stack + c->len) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)(top - 64);
    /* Frame as fm_ctx_switch leaves it: csr word, r15..r12, rbx, rbp, ret. */
    uint32_t mxcsr;
    uint16_t fpucw;
    __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
    __asm__ volatile("fnstcw %0" : "=m"(fpucw));
    sp[0] = (uint64_t)mxcsr | ((uint64_t)fpucw << 32);
    sp[1] = 0;                               /* r15 */
    sp[2] = 0;                               /* r14 */
    sp[3] = (uint64_t)(uintptr_t)ctx_main;   /* r13: function */
    sp[4] = (uint64_t)(uintptr_t)c;          /* r12: argument */
    sp[5] = 0;                               /* rbx */
    sp[6] = 0;                               /* rbp */
    sp[7] = (uint64_t)(uintptr_t)fm_ctx_boot;
    c->sp = sp;
#else
    if (getcontext(&c->uc) != 0) {
        munmap(c->stack, c->len);
        free(c);
        return vmmc_error_sys("fm: getcontext");
    }
    c->uc.uc_stack.ss_sp = c->stack + pg;
    c->uc.uc_stack.ss_size = len;
    c->uc.uc_link = NULL;
    uintptr_t v = (uintptr_t)c;
    makecontext(&c->uc, (void (*)(void))ctx_main_uc, 2, (unsigned)(v >> 32), (unsigned)v);
#endif
    c->next_all = fm->ctx_all;
    fm->ctx_all = c;
    *out = c;
    return VMMC_OK;
}

int fm_ctx_get(struct fm *fm, fm_ctx_t **out)
{
    fm_ctx_t *c = fm->ctx_free;
    if (VMMC_LIKELY(c != NULL)) {
        fm->ctx_free = c->next_free;
        *out = c;
        return VMMC_OK;
    }
    return ctx_new(fm, out);
}

void fm_ctx_put(struct fm *fm, fm_ctx_t *c)
{
    c->peer = NULL;
    c->finished = 0;
    c->next_free = fm->ctx_free;
    fm->ctx_free = c;
}

void fm_ctx_assign(fm_ctx_t *c, fm_peer_t *p, fm_handler_t fn, void *arg)
{
    c->peer = p;
    c->fn = fn;
    c->arg = arg;
    c->finished = 0;
}

int fm_ctx_resume(struct fm *fm, fm_ctx_t *c)
{
    fm_ctx_t *prev = fm->cur_ctx;
    fm->cur_ctx = c;
#ifdef FM_ASM_SWITCH
    fm_ctx_switch(&fm->main_sp, c->sp);
#else
    ucontext_t here;
    c->back = &here;
    fm->main_sp = &here;
    swapcontext(&here, &c->uc);
#endif
    fm->cur_ctx = prev;
    return c->finished;
}

void fm_ctx_yield(struct fm *fm)
{
    fm_ctx_t *c = fm->cur_ctx;
#ifdef FM_ASM_SWITCH
    fm_ctx_switch(&c->sp, fm->main_sp);
#else
    swapcontext(&c->uc, c->back);
#endif
}

void fm_ctx_free_all(struct fm *fm)
{
    fm_ctx_t *c = fm->ctx_all;
    char here;
    while (c) {
        fm_ctx_t *n = c->next_all;
        /* A child of fork() from a handler drops its copy of the channel on
         * that handler's stack: leave that one mapped (a handler cannot
         * close its channel otherwise). */
        if ((uintptr_t)&here - (uintptr_t)c->stack >= c->len) {
            munmap(c->stack, c->len);
            free(c);
        }
        c = n;
    }
    fm->ctx_all = NULL;
    fm->ctx_free = NULL;
}
