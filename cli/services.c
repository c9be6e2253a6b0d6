/* services.c: the local stack's PostgreSQL and Redis (`kforge up`), locked down by default
 * (docs/security.md, "Services and secrets"). The layout of var/:
 *
 *   var/            0700 (0711 as root: PostgreSQL's own user must reach pg/, run/pg/, log/)
 *   var/pg/         the cluster, PostgreSQL's user, 0700
 *   var/run/        pid files
 *   var/run/pg/     PostgreSQL's socket: the folder is PostgreSQL's user's alone (0700), the socket
 *                   0700; no TCP unless `kforge up --pg-listen ADDRESSES`
 *   var/secrets/    0700: pgpass (libpq's password file), redis-password, redis.conf (Redis's
 *                   settings with its requirepass), each 0600
 *   var/redis/      Redis's folder, 0700; Redis listens on 127.0.0.1 only and asks for the password
 *   var/log/        every program's log, 0600
 *   var/api-key, var/stack.env  0600
 *
 * Every PostgreSQL connection gives the password (scram-sha-256). The URLs name the password
 * files (libpq's passfile, lib/queue.h's password_file), never a password, so that no password
 * reaches a command line, an environment, stack.env or a log. */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "db.h"
#include "queue.h"

/* The first line of the pg_hba.conf that kforge writes; a cluster without it is an older
 * kforge's, whose rules trusted every local connection. */
#define HBA_MARK "# kforge up: every connection gives the password"

static const char hba_conf[] =
    HBA_MARK " (scram-sha-256). The socket's folder is\n"
             "# PostgreSQL's user's alone; TCP is off unless `kforge up --pg-listen` turns it on.\n"
             "local all all scram-sha-256\n"
             "host  all all 0.0.0.0/0 scram-sha-256\n"
             "host  all all ::/0      scram-sha-256\n";

#define PGPASS_PREFIX "*:*:*:kforge:"

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* var/REL into out ("" when too long: the calls that use it then fail). */
static void vpath(char *out, size_t n, const char *var, const char *rel) {
    if (snprintf(out, n, "%s/%s", var, rel) >= (int)n)
        out[0] = '\0';
}

/* Makes folder p (mode) if missing, else checks that it is a folder (and not a link, unless
 * follow: var/ itself may be one); then gives it to uid:gid and mode where it differs (an older
 * var/ gave run/ to postgres, mode 755). */
static int own_dir(const char *p, uid_t uid, gid_t gid, mode_t mode, bool follow) {
    struct stat st;
    if (mkdir(p, mode) != 0 && errno != EEXIST) {
        fprintf(stderr, "kforge up: mkdir %s: %s\n", p, strerror(errno));
        return -1;
    }
    if ((follow ? stat(p, &st) : lstat(p, &st)) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "kforge up: %s is not a folder\n", p);
        return -1;
    }
    if ((st.st_uid != uid || st.st_gid != gid) && chown(p, uid, gid) != 0) {
        fprintf(stderr, "kforge up: chown %s: %s\n", p, strerror(errno));
        return -1;
    }
    if ((st.st_mode & 07777) != mode && chmod(p, mode) != 0) {
        fprintf(stderr, "kforge up: chmod %s: %s\n", p, strerror(errno));
        return -1;
    }
    return 0;
}

/* Makes file p if missing (create), else sets owner uid:gid and mode 0600; a missing file that
 * is not to be created is left alone. 0 or -1. */
static int own_file(const char *p, uid_t uid, gid_t gid, bool create) {
    int fd = open(p, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
    if (fd < 0) {
        if (errno == ENOENT && !create)
            return 0;
        fprintf(stderr, "kforge up: %s: %s\n", p, strerror(errno));
        return -1;
    }
    struct stat st;
    int rc = fstat(fd, &st);
    if (rc == 0 && (st.st_uid != uid || st.st_gid != gid))
        rc = fchown(fd, uid, gid);
    if (rc == 0 && (st.st_mode & 07777) != 0600)
        rc = fchmod(fd, 0600);
    if (rc != 0)
        fprintf(stderr, "kforge up: chown/chmod %s: %s\n", p, strerror(errno));
    close(fd);
    return rc;
}

/* Every regular file of var/log to mode 0600 (older versions wrote them 0644). */
static int lock_logs(const char *dir) {
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            (st.st_mode & 077) != 0 && fchmodat(dirfd(d), e->d_name, 0600, 0) != 0)
            rc = -1;
    }
    closedir(d);
    return rc;
}

/* PostgreSQL's own user must pass through every folder above var/: -1 with the reason on
 * stderr when one of them is closed to it (a home folder of mode 0700, pytest's temporary
 * folders). */
static int pg_can_reach(const char *var, const struct passwd *pw) {
    char p[PATH_MAX];
    if (realpath(var, p) == NULL) /* not made yet: its path as given */
        snprintf(p, sizeof(p), "%s", var);
    for (char *slash = strrchr(p, '/'); slash != NULL; slash = strrchr(p, '/')) {
        *slash = '\0';
        const char *dir = p[0] ? p : "/";
        struct stat st;
        if (stat(dir, &st) != 0)
            continue;
        bool x = (st.st_mode & S_IXOTH) || (st.st_uid == pw->pw_uid && (st.st_mode & S_IXUSR)) ||
                 (st.st_gid == pw->pw_gid && (st.st_mode & S_IXGRP));
        if (!x) {
            fprintf(stderr,
                    "kforge up: PostgreSQL runs as %s, who cannot pass through %s (mode %03o): "
                    "put var/ elsewhere (--var) or open that folder to it (chmod o+x)\n",
                    pw->pw_name, dir, (unsigned)(st.st_mode & 0777));
            return -1;
        }
        if (!p[0])
            break;
    }
    return 0;
}

int kfc_var_lockdown(const char *var, const char *pg_user) {
    struct passwd *pw = pg_user ? getpwnam(pg_user) : NULL;
    if (pg_user && pw == NULL) {
        fprintf(stderr, "kforge up: no user %s\n", pg_user);
        return -1;
    }
    if (pw && pg_can_reach(var, pw) != 0)
        return -1;
    uid_t me = geteuid(), pg = pw ? pw->pw_uid : me;
    gid_t my_g = getegid(), pg_g = pw ? pw->pw_gid : my_g;
    mode_t reach = pw ? 0711 : 0700; /* PostgreSQL's user passes through, lists nothing */
    char p[PATH_MAX + 64];
    struct {
        const char *rel;
        bool pg_owns;
        mode_t mode;
    } dirs[] = {
        {"run", false, reach}, {"run/pg", true, 0700}, {"log", false, reach},
        {"pg", true, 0700},    {"redis", false, 0700}, {"secrets", false, 0700},
    };
    if (own_dir(var, me, my_g, reach, true) != 0)
        return -1;
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        vpath(p, sizeof(p), var, dirs[i].rel);
        if (own_dir(p, dirs[i].pg_owns ? pg : me, dirs[i].pg_owns ? pg_g : my_g, dirs[i].mode,
                    false))
            return -1;
    }
    vpath(p, sizeof(p), var, "log");
    if (lock_logs(p) != 0) {
        fprintf(stderr, "kforge up: cannot make the logs of %s private\n", p);
        return -1;
    }
    static const char *const mine[] = {"api-key", "stack.env", "log/redis.log"};
    for (size_t i = 0; i < sizeof(mine) / sizeof(mine[0]); i++) {
        vpath(p, sizeof(p), var, mine[i]);
        if (own_file(p, me, my_g, i == 2) != 0)
            return -1;
    }
    vpath(p, sizeof(p), var, "log/postgres.log"); /* pg_ctl -l opens it as PostgreSQL's user */
    return own_file(p, pg, pg_g, true);
}

/* A new password: 24 random bytes as 48 hex digits (no character that a URL, a pgpass line
 * or redis.conf would have to quote). 0 or -1. */
static int new_password(char out[49]) {
    unsigned char b[24];
    size_t got = 0;
    while (got < sizeof(b)) {
        ssize_t r = getrandom(b + got, sizeof(b) - got, 0);
        if (r < 0 && errno != EINTR)
            return -1;
        got += r > 0 ? (size_t)r : 0;
    }
    for (size_t i = 0; i < sizeof(b); i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    explicit_bzero(b, sizeof(b));
    return 0;
}

/* The password of a secret file: its first line after prefix. When the file does not exist, a
 * new password is made and written (prefix, password, newline; mode 0600). An existing file
 * open to group or others is closed to them. 0, or -1 with the reason on stderr. */
static int secret(const char *path, const char *prefix, char pw[49]) {
    char *text = kfc_read_file(path, NULL);
    if (text == NULL) {
        char line[128];
        if (errno != ENOENT || new_password(pw) != 0) {
            fprintf(stderr, "kforge up: %s: %s\n", path, strerror(errno));
            return -1;
        }
        snprintf(line, sizeof(line), "%s%s\n", prefix, pw);
        int rc = kfc_write_file(path, line, 0600);
        explicit_bzero(line, sizeof(line));
        if (rc != 0)
            fprintf(stderr, "kforge up: cannot write %s: %s\n", path, strerror(errno));
        return rc;
    }
    size_t plen = strlen(prefix);
    text[strcspn(text, "\r\n")] = '\0';
    bool ok =
        strncmp(text, prefix, plen) == 0 && strlen(text + plen) >= 16 && strlen(text + plen) <= 48;
    if (ok)
        snprintf(pw, 49, "%s", text + plen);
    explicit_bzero(text, strlen(text));
    free(text);
    if (!ok) {
        fprintf(stderr, "kforge up: %s is not a password file of kforge up (remove it)\n", path);
        return -1;
    }
    struct stat st;
    if (stat(path, &st) == 0 && (st.st_mode & 077) != 0 && chmod(path, 0600) != 0) {
        fprintf(stderr, "kforge up: chmod %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- PostgreSQL ---- */

static void pg_urls(struct kfc_services *s, char *admin, size_t n) {
    snprintf(s->db_url, sizeof(s->db_url),
             "postgresql:///kforge?host=%s/run/pg&port=%d&user=kforge&passfile=%s/secrets/pgpass",
             s->var, s->pg_port, s->var);
    snprintf(admin, n,
             "postgresql:///postgres?host=%s/run/pg&port=%d&user=kforge&passfile=%s/secrets/pgpass",
             s->var, s->pg_port, s->var);
}

/* Writes kforge's pg_hba.conf into the cluster (owned by PostgreSQL's user). 0 or -1. */
static int write_hba(const struct kfc_services *s) {
    char p[PATH_MAX + 64];
    vpath(p, sizeof(p), s->var, "pg/pg_hba.conf");
    struct passwd *pw = s->pg_user ? getpwnam(s->pg_user) : NULL;
    if (kfc_write_file(p, hba_conf, 0600) != 0 || (pw && chown(p, pw->pw_uid, pw->pw_gid) != 0)) {
        fprintf(stderr, "kforge up: cannot write %s: %s\n", p, strerror(errno));
        return -1;
    }
    return 0;
}

static bool hba_is_ours(const struct kfc_services *s) {
    char p[PATH_MAX + 64];
    vpath(p, sizeof(p), s->var, "pg/pg_hba.conf");
    char *text = kfc_read_file(p, NULL);
    bool ours = text && strncmp(text, HBA_MARK, strlen(HBA_MARK)) == 0;
    free(text);
    return ours;
}

/* initdb with the superuser kforge and its password (scram-sha-256), then kforge's rules. The
 * password reaches initdb through a file in the socket's folder, PostgreSQL's user's alone. */
static int pg_initdb(const struct kfc_services *s, const char *pw) {
    char data[PATH_MAX + 64], pwfile[PATH_MAX + 64], opt[PATH_MAX + 80], bin[PATH_MAX + 64];
    char log[PATH_MAX + 64], text[64];
    vpath(data, sizeof(data), s->var, "pg");
    vpath(pwfile, sizeof(pwfile), s->var, "run/pg/initdb-password");
    vpath(log, sizeof(log), s->var, "log/up.log");
    snprintf(text, sizeof(text), "%s\n", pw);
    struct passwd *u = s->pg_user ? getpwnam(s->pg_user) : NULL;
    int rc = kfc_write_file(pwfile, text, 0600);
    explicit_bzero(text, sizeof(text));
    if (rc != 0 || (u && chown(pwfile, u->pw_uid, u->pw_gid) != 0)) {
        fprintf(stderr, "kforge up: %s: %s\n", pwfile, strerror(errno));
        unlink(pwfile);
        return -1;
    }
    snprintf(opt, sizeof(opt), "--pwfile=%s", pwfile);
    snprintf(bin, sizeof(bin), "%s/initdb", s->pgbin);
    const char *a[] = {bin, "-D", data,   "-U",          "kforge", "-A", "scram-sha-256",
                       opt, "-E", "UTF8", "--no-locale", NULL};
    rc = kfc_run(s->pg_user, a, log);
    unlink(pwfile);
    if (rc != 0) {
        fprintf(stderr, "kforge up: initdb failed (see %s)\n", log);
        return -1;
    }
    return write_hba(s);
}

/* Starts the cluster (initdb first when there is none) with its socket in var/run/pg. */
static int pg_start(const struct kfc_services *s, const char *pw) {
    char data[PATH_MAX + 64], log[PATH_MAX + 64], plog[PATH_MAX + 64], bin[PATH_MAX + 64];
    char version[PATH_MAX + 64], pidf[PATH_MAX + 64], opts[2 * PATH_MAX];
    vpath(data, sizeof(data), s->var, "pg");
    vpath(log, sizeof(log), s->var, "log/postgres.log");
    vpath(plog, sizeof(plog), s->var, "log/up.log");
    vpath(version, sizeof(version), s->var, "pg/PG_VERSION");
    vpath(pidf, sizeof(pidf), s->var, "pg/postmaster.pid");
    snprintf(bin, sizeof(bin), "%s/pg_ctl", s->pgbin);
    if (access(pidf, F_OK) == 0) {
        /* a postmaster that does not answer on our socket: an older kforge's, or a hung one */
        const char *a[] = {bin, "-D", data, "-m", "fast", "-w", "-t", "30", "stop", NULL};
        kfc_run(s->pg_user, a, plog);
    }
    if (access(version, F_OK) != 0 && pg_initdb(s, pw) != 0)
        return -1;
    snprintf(opts, sizeof(opts),
             "-p %d -k %s/run/pg -c unix_socket_permissions=0700 -c listen_addresses='%s'",
             s->pg_port, s->var, s->pg_listen ? s->pg_listen : "");
    const char *a[] = {bin, "-D", data, "-l", log, "-o", opts, "-w", "-t", "60", "start", NULL};
    if (kfc_run(s->pg_user, a, plog) != 0) {
        fprintf(stderr, "kforge up: PostgreSQL did not start (see %s)\n", log);
        return -1;
    }
    return 0;
}

/* A cluster of an older kforge trusted every local connection: the role kforge gets the
 * password (sent as a SCRAM verifier made here, never in clear), kforge's rules replace the
 * trust ones, and PostgreSQL reloads them. */
static int pg_convert(const struct kfc_services *s, const char *admin, const char *pw) {
    PGconn *c = PQconnectdb(admin);
    int rc = -1;
    char *verifier = NULL, *lit = NULL;
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr,
                "kforge up: %s/pg trusts local connections (an older kforge's) and cannot be "
                "given a password: %s",
                s->var, PQerrorMessage(c));
        goto out;
    }
    verifier = PQencryptPasswordConn(c, pw, "kforge", "scram-sha-256");
    lit = verifier ? PQescapeLiteral(c, verifier, strlen(verifier)) : NULL;
    char sql[512];
    if (lit == NULL ||
        snprintf(sql, sizeof(sql), "ALTER ROLE kforge PASSWORD %s", lit) >= (int)sizeof(sql)) {
        fprintf(stderr, "kforge up: cannot make a SCRAM verifier: %s", PQerrorMessage(c));
        goto out;
    }
    PGresult *r = PQexec(c, sql);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!ok || write_hba(s) != 0) {
        if (!ok)
            fprintf(stderr, "kforge up: ALTER ROLE kforge: %s", PQerrorMessage(c));
        goto out;
    }
    r = PQexec(c, "SELECT pg_reload_conf()");
    ok = PQresultStatus(r) == PGRES_TUPLES_OK;
    PQclear(r);
    if (!ok) {
        fprintf(stderr, "kforge up: pg_reload_conf: %s", PQerrorMessage(c));
        goto out;
    }
    fprintf(stderr,
            "kforge up: %s/pg trusted every local connection (an older kforge): the "
            "role kforge now has a password, which every connection must give\n",
            s->var);
    rc = 0;
out:
    PQfreemem(lit);
    PQfreemem(verifier);
    PQfinish(c);
    return rc;
}

/* The database kforge, made when missing. */
static int pg_createdb(const char *admin) {
    char err[512];
    struct kf_db *db = NULL;
    for (int i = 0; i < 50 && db == NULL; i++) { /* a reload takes effect within moments */
        db = kf_db_open(admin, NULL, 0, err, sizeof(err));
        if (db == NULL)
            sleep_ms(100);
    }
    if (db == NULL) {
        fprintf(stderr, "kforge up: %s\n", err);
        return -1;
    }
    PGresult *r = kf_db_exec_sql(db, "SELECT 1 FROM pg_database WHERE datname = 'kforge'");
    bool have = r && PQntuples(r) == 1;
    PQclear(r);
    int rc = 0;
    if (!have && (r = kf_db_exec_sql(db, "CREATE DATABASE kforge")) == NULL) {
        fprintf(stderr, "kforge up: CREATE DATABASE: %s\n", kf_db_error(db));
        rc = -1;
    }
    if (!have)
        PQclear(r);
    kf_db_close(db);
    return rc;
}

int kfc_pg_ensure(struct kfc_services *s, bool *started) {
    char pgpass[PATH_MAX + 64], admin[2 * PATH_MAX + 128], pw[49];
    *started = false;
    vpath(pgpass, sizeof(pgpass), s->var, "secrets/pgpass");
    if (secret(pgpass, PGPASS_PREFIX, pw) != 0)
        return -1;
    if (s->pg_port <= 0)
        s->pg_port = s->pg_listen ? kfc_free_port() : 5432; /* a socket only: no port to share */
    pg_urls(s, admin, sizeof(admin));
    int rc = 0;
    PGPing ping = PQping(admin);
    for (int i = 0; ping == PQPING_REJECT && i < 600; i++) { /* starting, or recovering */
        sleep_ms(100);
        ping = PQping(admin);
    }
    if (ping != PQPING_OK) {
        rc = pg_start(s, pw);
        *started = rc == 0;
    }
    if (rc == 0 && !hba_is_ours(s))
        rc = pg_convert(s, admin, pw);
    explicit_bzero(pw, sizeof(pw));
    if (rc == 0)
        rc = pg_createdb(admin);
    return rc == 0 ? kfc_migrate(s->db_url, NULL, true) : -1;
}

/* ---- Redis ---- */

/* var/secrets/redis.conf: Redis's settings, its password among them (so that it is on no
 * command line). Rewritten at each start. */
static int redis_conf(const struct kfc_services *s, const char *conf, const char *pw) {
    char text[4 * PATH_MAX + 512];
    int n =
        snprintf(text, sizeof(text),
                 "# written by kforge up at each start of Redis\n"
                 "port %d\nbind 127.0.0.1\nprotected-mode yes\n"
                 "dir \"%s/redis\"\npidfile \"%s/run/redis.pid\"\nlogfile \"%s/log/redis.log\"\n"
                 "daemonize yes\nsave \"\"\nappendonly no\nrequirepass %s\n",
                 s->redis_port, s->var, s->var, s->var, pw);
    int rc = n < (int)sizeof(text) ? kfc_write_file(conf, text, 0600) : -1;
    explicit_bzero(text, sizeof(text));
    if (rc != 0)
        fprintf(stderr, "kforge up: cannot write %s\n", conf);
    return rc;
}

static bool redis_answers(const char *url, int timeout_ms) {
    char err[256];
    struct kf_queue *q = kf_queue_open(url, timeout_ms, err, sizeof(err));
    bool ok = q && kf_queue_ping(q) == 0;
    kf_queue_close(q);
    return ok;
}

/* Stops the redis-server of var/run/redis.pid (one that does not answer with our password). */
static void redis_stop(const struct kfc_services *s) {
    char pidf[PATH_MAX + 64];
    vpath(pidf, sizeof(pidf), s->var, "run/redis.pid");
    pid_t pid = kfc_read_pid(pidf);
    if (!kfc_pid_is(pid, "redis-server"))
        return;
    kill(pid, SIGTERM);
    for (int i = 0; i < 100 && kfc_pid_is(pid, "redis-server"); i++)
        sleep_ms(100);
    if (kfc_pid_is(pid, "redis-server"))
        kill(pid, SIGKILL);
}

int kfc_redis_ensure(struct kfc_services *s, bool *started) {
    char pwf[PATH_MAX + 64], conf[PATH_MAX + 64], log[PATH_MAX + 64], pw[49], err[256];
    *started = false;
    vpath(pwf, sizeof(pwf), s->var, "secrets/redis-password");
    vpath(conf, sizeof(conf), s->var, "secrets/redis.conf");
    vpath(log, sizeof(log), s->var, "log/redis.log");
    if (secret(pwf, "", pw) != 0)
        return -1;
    if (s->redis_port > 0) {
        snprintf(s->redis_url, sizeof(s->redis_url), "redis://127.0.0.1:%d?password_file=%s",
                 s->redis_port, pwf);
        if (redis_answers(s->redis_url, 1000)) {
            explicit_bzero(pw, sizeof(pw));
            return 0;
        }
    }
    redis_stop(s);
    if (s->redis_port <= 0 || !kfc_port_free(s->redis_port))
        s->redis_port = kfc_free_port();
    snprintf(s->redis_url, sizeof(s->redis_url), "redis://127.0.0.1:%d?password_file=%s",
             s->redis_port, pwf);
    int rc = redis_conf(s, conf, pw);
    explicit_bzero(pw, sizeof(pw));
    const char *a[] = {s->redis_bin, conf, NULL};
    if (rc != 0 || kfc_run(NULL, a, log) != 0) {
        fprintf(stderr, "kforge up: redis-server did not start (see %s)\n", log);
        return -1;
    }
    *started = true;
    for (int i = 0; i < 50; i++) {
        struct kf_queue *q = kf_queue_open(s->redis_url, 1000, err, sizeof(err));
        bool ok = q && kf_queue_ping(q) == 0;
        kf_queue_close(q);
        if (ok)
            return 0;
        sleep_ms(100);
    }
    fprintf(stderr, "kforge up: redis does not answer: %s\n", err);
    return -1;
}
