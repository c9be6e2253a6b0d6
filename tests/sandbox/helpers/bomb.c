/*
 * bomb.c: resource bombs for tests/sandbox, run inside kforge-jail; each runs until a limit
 * of the jail stops it.
 *
 *   bomb fork          fork forever, in every child too
 *   bomb mem           allocate and touch 1 MiB blocks forever (exit 3 once refused)
 *   bomb disk PATH     append 1 MiB blocks to PATH forever (exit 4 on a write error)
 *   bomb spin          a busy loop
 *   bomb flood         write to stdout forever
 *   bomb background    start a child that outlives this process, print its pid, exit 0
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static _Noreturn void fork_bomb(void) {
    for (;;) {
        if (fork() < 0)
            usleep(1000);
    }
}

static int mem_bomb(void) {
    size_t total = 0;
    for (;;) {
        char *p = malloc(1 << 20);
        if (p == NULL) {
            fprintf(stderr, "bomb: malloc refused after %zu MiB\n", total);
            return 3;
        }
        memset(p, 0xa5, 1 << 20);
        total++;
    }
}

static int disk_bomb(const char *path) {
    static char block[1 << 20];
    memset(block, 'd', sizeof(block));
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) {
        perror("bomb: open");
        return 4;
    }
    for (;;) {
        if (write(fd, block, sizeof(block)) < 0) {
            fprintf(stderr, "bomb: write: %s\n", strerror(errno));
            return 4;
        }
    }
}

static int flood(void) {
    static char line[4096];
    memset(line, 'x', sizeof(line) - 1);
    line[sizeof(line) - 1] = '\n';
    for (;;)
        if (write(1, line, sizeof(line)) < 0)
            return 5;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "fork"))
        fork_bomb();
    if (argc >= 2 && !strcmp(argv[1], "mem"))
        return mem_bomb();
    if (argc >= 3 && !strcmp(argv[1], "disk"))
        return disk_bomb(argv[2]);
    if (argc >= 2 && !strcmp(argv[1], "spin")) {
        volatile unsigned long n = 0;
        for (;;)
            n++;
    }
    if (argc >= 2 && !strcmp(argv[1], "flood"))
        return flood();
    if (argc >= 2 && !strcmp(argv[1], "background")) {
        pid_t pid = fork();
        if (pid == 0) {
            setsid();
            for (;;)
                pause();
        }
        printf("%d\n", (int)pid);
        return 0;
    }
    fprintf(stderr, "usage: bomb fork|mem|disk PATH|spin|flood|background\n");
    return 2;
}
