#!/bin/sh
# verdicts.sh writes VERDICTS.tsv: HAProxy's own verdict (haproxy -c) on
# each configuration of this directory, and whether it is HTTP only.
#
#   sh haproxy/testdata/corpus/verdicts.sh [OUT]
#
# OUT defaults to VERDICTS.tsv beside this script; "-" is standard output.
# haproxy (Debian 12's 2.6) and openssl must be on PATH.
# TestCorpusVerdicts (haproxy/corpus_verdicts_test.go) runs it and wants
# its output to be VERDICTS.tsv as committed.
#
# Columns, tab separated, one row a file in name order:
#   file    the configuration's name
#   status  haproxy -c's exit status (0: HAProxy accepts the file)
#   class   http-only (every frontend, backend and listen section is in
#           mode http), tcp (all in mode tcp) or mixed; a section's mode
#           is its own mode line, else that of the defaults section above
#           it, else tcp (HAProxy's default)
#   error   the first [ALERT] line of haproxy -c, without its process id
#           and "config :" prefix, the file's temporary path written as
#           its name; empty when it is accepted
#
# Certificates are not in the corpus: the files a configuration names
# with crt, crt-list and ca-file do not exist here, and haproxy -c
# refuses a bind whose certificate it cannot read. So each file is
# checked as a copy in which every crt names a throwaway self-signed
# certificate (its directory where the crt ends in /), every crt-list a
# list of that one, every ca-file that certificate: the verdict is on
# the configuration, not on this machine's /etc. Nothing else is
# changed, so line numbers hold. Other files a configuration names (Lua
# scripts, errorfiles, pattern files) are read where they are: Debian's
# /etc/haproxy/errors exists where its haproxy package is installed.
set -eu

dir=$(cd "$(dirname "$0")" && pwd)
out=${1:-"$dir/VERDICTS.tsv"}
for tool in haproxy openssl; do
	command -v "$tool" >/dev/null || { echo "verdicts.sh: $tool is not on PATH" >&2; exit 2; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir "$tmp/certs" "$tmp/cfg"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
	-days 3650 -subj /CN=corpus.test -keyout "$tmp/key.pem" -out "$tmp/ca.pem" 2>/dev/null
cat "$tmp/ca.pem" "$tmp/key.pem" >"$tmp/certs/site.pem"
printf '%s\n' "$tmp/certs/site.pem" >"$tmp/site.crtlist"

# version: haproxy's major.minor, written in the header.
version=$(haproxy -v | sed -n 's/^HAProxy version \([0-9]*\.[0-9]*\).*/\1/p' | head -n 1)

{
	printf '# HAProxy %s verdicts (haproxy -c) on haproxy/testdata/corpus, written by verdicts.sh: do not edit\n' "$version"
	printf 'file\tstatus\tclass\terror\n'
	for cfg in "$dir"/*.cfg; do
		name=$(basename "$cfg")
		copy="$tmp/cfg/$name"
		sed -E \
			-e "s#([[:space:]]crt[[:space:]]+)[^[:space:]]*/([[:space:]]|\$)#\\1$tmp/certs/\\2#g" \
			-e "s#([[:space:]]crt[[:space:]]+)[^[:space:]]*[^/[:space:]]([[:space:]]|\$)#\\1$tmp/certs/site.pem\\2#g" \
			-e "s#([[:space:]]crt-list[[:space:]]+)[^[:space:]]+#\\1$tmp/site.crtlist#g" \
			-e "s#([[:space:]]ca-file[[:space:]]+)[^[:space:]]+#\\1$tmp/ca.pem#g" \
			"$cfg" >"$copy"
		status=0
		haproxy -c -f "$copy" >"$tmp/out" 2>&1 || status=$?
		error=$(grep -m 1 '\[ALERT\]' "$tmp/out" |
			sed -e 's/^\[ALERT\] *([0-9]*) : //' -e 's/^config : //' \
				-e "s#$tmp/cfg/##g" -e "s#$tmp#<tmp>#g" | tr '\t' ' ' || true)
		class=$(awk '
			function done() { if (inproxy) { if (mode == "http") http++; else tcp++ } }
			{ sub(/(^|[[:space:]])#.*/, "") }
			NF == 0 { next }
			$1 == "defaults" { done(); inproxy = 0; indefaults = 1; defmode = "tcp"; next }
			$1 == "frontend" || $1 == "backend" || $1 == "listen" {
				done(); inproxy = 1; indefaults = 0; mode = defmode; next }
			$1 ~ /^(global|resolvers|userlist|peers|cache|fcgi-app|mailers|program|http-errors|ring|crt-store|traces)$/ {
				done(); inproxy = 0; indefaults = 0; next }
			$1 == "mode" && indefaults { defmode = $2 }
			$1 == "mode" && inproxy { mode = $2 }
			END {
				done()
				if (tcp == 0) print "http-only"; else if (http == 0) print "tcp"; else print "mixed"
			}
			BEGIN { defmode = "tcp" }' "$cfg")
		printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$class" "$error"
	done
} >"$tmp/verdicts.tsv"

if [ "$out" = - ]; then
	cat "$tmp/verdicts.tsv"
else
	cp "$tmp/verdicts.tsv" "$out"
fi
