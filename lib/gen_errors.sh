#!/bin/sh
# gen_errors.sh: the error registry (errors.tsv) as C.
#   gen_errors.sh errors.tsv OUTDIR   writes OUTDIR/kf_errors.h and OUTDIR/kf_errors.c
#   gen_errors.sh --names errors.tsv  prints the names, one per line (the OpenAPI enum test)
set -eu

usage() {
    echo "usage: $0 errors.tsv OUTDIR | $0 --names errors.tsv" >&2
    exit 2
}

# The registry's rows as "code<TAB>name<TAB>http<TAB>hint", comments and blanks dropped; fails
# on a malformed row or a duplicate code or name.
rows() {
    awk -F '\t' '
        /^[[:space:]]*#/ || /^[[:space:]]*$/ { next }
        NF < 4 || $1 !~ /^[0-9]+$/ || $2 !~ /^[a-z][a-z0-9_]*$/ || $3 !~ /^[1-5][0-9][0-9]$/ {
            printf "errors.tsv:%d: malformed row\n", NR > "/dev/stderr"; bad = 1; exit 1
        }
        seen_code[$1]++ || seen_name[$2]++ {
            printf "errors.tsv:%d: duplicate code or name\n", NR > "/dev/stderr"; bad = 1; exit 1
        }
        { print $1 "\t" $2 "\t" $3 "\t" $4 }
        END { if (bad) exit 1 }
    ' "$1"
}

gen_header() {
    awk -F '\t' '
        BEGIN {
            print "/* kf_errors.h: generated from lib/errors.tsv by lib/gen_errors.sh; do not edit. */"
            print "#ifndef KF_ERRORS_H"
            print "#define KF_ERRORS_H"
            print ""
            print "#include <stddef.h>"
            print ""
            print "enum kf_err {"
            print "    KF_E_OK = 0,"
        }
        { printf "    KF_E_%s = %s,\n", toupper($2), $1 }
        END {
            print "};"
            print ""
            print "/* One row of the registry. */"
            print "struct kf_err_info {"
            print "    int code;"
            print "    const char *name;"
            print "    int http_status;"
            print "    const char *hint;"
            print "};"
            print ""
            print "/* The row of e (static storage), or NULL when e is not in the registry. */"
            print "const struct kf_err_info *kf_err_info(enum kf_err e);"
            print ""
            print "/* The whole registry (static storage) and its length in *n. */"
            print "const struct kf_err_info *kf_err_table(size_t *n);"
            print ""
            print "#endif"
        }
    '
}

gen_source() {
    awk -F '\t' '
        function cstr(s) {
            gsub(/\\/, "\\\\", s)
            gsub(/"/, "\\\"", s)
            return "\"" s "\""
        }
        BEGIN {
            print "/* kf_errors.c: generated from lib/errors.tsv by lib/gen_errors.sh; do not edit. */"
            print "#include \"kf_errors.h\""
            print ""
            print "static const struct kf_err_info kf_err_rows[] = {"
        }
        { printf "    {%s, %s, %s, %s},\n", $1, cstr($2), $3, cstr($4) }
        END {
            print "};"
            print ""
            print "const struct kf_err_info *kf_err_table(size_t *n) {"
            print "    *n = sizeof(kf_err_rows) / sizeof(kf_err_rows[0]);"
            print "    return kf_err_rows;"
            print "}"
            print ""
            print "const struct kf_err_info *kf_err_info(enum kf_err e) {"
            print "    for (size_t i = 0; i < sizeof(kf_err_rows) / sizeof(kf_err_rows[0]); i++) {"
            print "        if (kf_err_rows[i].code == (int)e)"
            print "            return &kf_err_rows[i];"
            print "    }"
            print "    return NULL;"
            print "}"
        }
    '
}

if [ "$#" -eq 2 ] && [ "$1" = "--names" ]; then
    rows "$2" | cut -f 2
    exit 0
fi
[ "$#" -eq 2 ] || usage
tsv=$1
out=$2
mkdir -p "$out"
tmp_rows=$out/.kf_errors.rows.$$
trap 'rm -f "$tmp_rows" "$out/kf_errors.h.$$" "$out/kf_errors.c.$$"' EXIT
rows "$tsv" > "$tmp_rows"
gen_header < "$tmp_rows" > "$out/kf_errors.h.$$"
gen_source < "$tmp_rows" > "$out/kf_errors.c.$$"
mv "$out/kf_errors.h.$$" "$out/kf_errors.h"
mv "$out/kf_errors.c.$$" "$out/kf_errors.c"
