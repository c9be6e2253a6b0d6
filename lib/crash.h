/* crash.h: a report on stderr when a program dies of a fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
 * SIGABRT): the signal, the faulting address and the call stack as "binary(+offset)" frames,
 * which `addr2line -f -e BINARY OFFSET` turns into functions and lines. The signal is then
 * raised again with its default action, so the exit status and any core dump are unchanged. */
#ifndef KF_CRASH_H
#define KF_CRASH_H

/* Installs the handlers for the process, with an alternate signal stack for the calling thread
 * (so a stack overflow there is reported too). who names the program in the report. Returns 0
 * or -1 (the handlers could not be installed; the program runs on without them). */
int kf_crash_install(const char *who);

#endif
