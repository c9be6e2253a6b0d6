/* crash.c: the fault report (see crash.h). The handler uses only async-signal-safe calls
 * (write, backtrace_symbols_fd after backtrace was warmed up, sigaction, raise). */
#include "crash.h"

#include <execinfo.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)

int kf_crash_install(const char *who) {
    (void)who;
    return 0; /* AddressSanitizer's own SIGSEGV report is better: leave its handler in place */
}

#else

#define FRAMES 64
#define ALT_STACK_BYTES (64 * 1024)

/* The program's name for the report. A signal handler has no argument to carry it, so this is
 * the one piece of process-wide state here; written once by kf_crash_install, before any
 * handler can run, and only read afterwards. */
static char crash_who[48];

static void put(const char *s) {
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

/* Unsigned v in hex with a 0x prefix into out (at least 19 bytes). */
static void hex(uintptr_t v, char *out) {
    char tmp[16];
    int n = 0;
    do {
        tmp[n++] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v && n < 16);
    out[0] = '0';
    out[1] = 'x';
    for (int i = 0; i < n; i++)
        out[2 + i] = tmp[n - 1 - i];
    out[2 + n] = '\0';
}

static void on_fault(int sig, siginfo_t *si, void *uctx) {
    (void)uctx;
    char addr[20];
    hex((uintptr_t)si->si_addr, addr);
    const char *name = sig == SIGSEGV   ? "SIGSEGV"
                       : sig == SIGBUS  ? "SIGBUS"
                       : sig == SIGFPE  ? "SIGFPE"
                       : sig == SIGILL  ? "SIGILL"
                       : sig == SIGABRT ? "SIGABRT"
                                        : "a fault";
    put("\n");
    put(crash_who);
    put(": crashed with ");
    put(name);
    put(" at address ");
    put(addr);
    put("; call stack (addr2line -f -e BINARY OFFSET):\n");
    void *frames[FRAMES];
    int n = backtrace(frames, FRAMES);
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
    put("end of call stack\n");
    /* SA_RESETHAND restored the default action: raising again ends the process as the fault
     * would have (a returning SIGSEGV handler would re-run the faulting instruction anyway) */
    raise(sig);
}

int kf_crash_install(const char *who) {
    size_t n = strlen(who);
    if (n >= sizeof(crash_who))
        n = sizeof(crash_who) - 1;
    memcpy(crash_who, who, n);
    crash_who[n] = '\0';
    void *warm[2];
    (void)backtrace(warm, 2); /* loads the unwinder now, not inside the handler */
    stack_t ss = {.ss_sp = malloc(ALT_STACK_BYTES), .ss_size = ALT_STACK_BYTES, .ss_flags = 0};
    int rc = 0;
    if (ss.ss_sp == NULL || sigaltstack(&ss, NULL) != 0) {
        free(ss.ss_sp); /* the handlers still run, on the faulting stack */
        rc = -1;
    } /* else the alternate stack lives as long as the process: never freed */
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        if (sigaction(sigs[i], &sa, NULL) != 0)
            rc = -1;
    return rc;
}

#endif
