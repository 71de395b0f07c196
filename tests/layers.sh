#!/bin/bash
# Layering check for daemon/: fails when a folder depends on another one that
# tests/layers.rules forbids, when folders depend on each other in a cycle,
# when a restricted symbol has an unexpected caller, when an internal header
# leaves its folder, or when a folder grows too many .c files.
#
#   tests/layers.sh [--rules FILE] [--no-symbols] [SRCDIR [BUILDDIR]]
#   tests/layers.sh --self-test
#
# SRCDIR defaults to $top_srcdir, BUILDDIR to $top_builddir (both exported by
# make check), FILE to SRCDIR/tests/layers.rules; the rules file documents
# its own format.  A dependency is either
#   - an include: a '#include "..."' line of a .c/.h file under daemon/,
#     resolved as the compiler does with -I daemon -I common -I proto
#     (own directory first), or
#   - a symbol: an object of the daemon (BUILDDIR/daemon/**/ibverbsd-*.o)
#     referencing a global symbol that another daemon object defines (nm).
# The symbol check is what catches a call made through a bare extern
# declaration; it needs a built tree and fails when there are no objects,
# unless --no-symbols asks for the include check alone (handy while moving
# files around).
#
# Exit status: 0 clean, 1 problems found, 99 the check itself could not run
# (bad rules, no objects, no nm), 77 (self-test only) no C compiler.
set -u

me=${0##*/}

usage() {
	sed -n "7,8s/^#   /usage: /p" "$0"
	exit "$1"
}

# Setup errors are not findings: automake counts 99 as a hard error.
die() {
	echo "$me: $*"
	exit 99
}

# --- awk programs -----------------------------------------------------------
# They are kept in shell variables (quoted here-documents, so that they may
# contain quotes) and exchange tab-separated records:
#   inc  FILE LINE WRITTEN TARGET   FILE includes "WRITTEN", found at TARGET
#                                   (empty when it resolves nowhere)
#   obj  OBJECT SOURCE              a daemon object and the .c it comes from
#   sym  OBJECT SOURCE SYMBOL DEF   OBJECT references SYMBOL, defined by the
#                                   daemon object of DEF (empty: not ours)
#   note TEXT                       printed, but no problem
# Paths are relative to the source tree (daemon/engine/send.c,
# common/log.h, proto/ibverbsd.pb-c.h); objects are shown as found.

# Reads the list of files (sources and headers), then every source file under
# daemon/; prints one "inc" record per quoted include outside comments.
IFS= read -r -d '' INCLUDES_AWK <<'EOF'
# normalize("daemon/engine/../core/x.h") = "daemon/core/x.h"; "" when the
# path climbs out of the source tree.
function normalize(p,   n, part, out, i, k, s) {
	n = split(p, part, "/")
	k = 0
	for (i = 1; i <= n; i++) {
		if (part[i] == "" || part[i] == ".")
			continue
		if (part[i] == "..") {
			if (k == 0)
				return ""
			k--
			continue
		}
		out[++k] = part[i]
	}
	s = out[1]
	for (i = 2; i <= k; i++)
		s = s "/" out[i]
	return s
}

function dirname(p) {
	if (index(p, "/") == 0)
		return "."
	sub(/\/[^\/]*$/, "", p)
	return p
}

# The compiler's order for a quoted include with
# -I$(top_srcdir)/daemon -I$(top_srcdir)/common -I$(top_builddir)/proto.
function resolve(from, name,   c) {
	c = normalize(dirname(from) "/" name)
	if (c in known)
		return c
	c = normalize("daemon/" name)
	if (c in known)
		return c
	c = normalize("common/" name)
	if (c in known)
		return c
	c = normalize("proto/" name)
	# Generated headers may not exist yet in a tree that was not built.
	if (c != "" && ((c in known) || name ~ /\.pb-c\.h$/))
		return c
	return ""
}

# The code of a line: comments go, string and character literals are
# stepped over whole so that a "/*" or a '"' inside them does not start
# anything.  A comment left open goes on in the next line (incomment).
function code_of(line,   code, i, tok) {
	code = ""
	while (line != "") {
		if (incomment) {
			i = index(line, "*/")
			if (i == 0)
				break
			line = substr(line, i + 2)
			code = code " "
			incomment = 0
		} else if (match(line, /"([^"\\]|\\.)*"|\047([^\047\\]|\\.)*\047|\/\*|\/\//)) {
			tok = substr(line, RSTART, RLENGTH)
			if (tok == "//") {
				code = code substr(line, 1, RSTART - 1)
				break
			}
			if (tok == "/*") {
				code = code substr(line, 1, RSTART - 1) " "
				line = substr(line, RSTART + 2)
				incomment = 1
				continue
			}
			code = code substr(line, 1, RSTART + RLENGTH - 1)
			line = substr(line, RSTART + RLENGTH)
		} else {
			code = code line
			break
		}
	}
	return code
}

function scan(file,   line, n, code, name, target, status) {
	incomment = 0
	n = 0
	while ((status = (getline line < file)) > 0) {
		n++
		code = code_of(line)
		if (code !~ /^[ \t]*#[ \t]*include[ \t]*"/)
			continue
		name = code
		sub(/^[ \t]*#[ \t]*include[ \t]*"/, "", name)
		sub(/".*/, "", name)
		target = resolve(file, name)
		# autoconf's config.h lives in the build directory, outside
		# the search path above; ours would have been found already.
		if (target == "" && name == "config.h")
			continue
		printf "inc\t%s\t%d\t%s\t%s\n", file, n, name, target
	}
	close(file)
	if (status < 0) {
		print "cannot read " file > "/dev/stderr"
		exit 2
	}
}

# The list: every .c/.h of daemon/ and common/, the headers of proto/.
{
	known[$0] = 1
	list[NR] = $0
}

END {
	for (i = 1; i <= NR; i++)
		if (list[i] ~ /^daemon\//)
			scan(list[i])
}
EOF

# Reads the list of files, the list of objects, then "nm -A -P -g" of the
# objects; prints "obj" and "sym" records (and notes about stale objects).
IFS= read -r -d '' SYMBOLS_AWK <<'EOF'
# daemon/engine/ibverbsd-send.o comes from daemon/engine/send.c.
function source_of(obj,   dir, base) {
	dir = obj
	sub(/\/[^\/]*$/, "", dir)
	base = obj
	sub(/.*\//, "", base)
	base = substr(base, length(prefix) + 1)
	sub(/\.o$/, ".c", base)
	return dir "/" base
}

FILENAME == src_list {
	is_src[$0] = 1
	next
}

# An object whose source is gone is left over from before a move: its
# symbols would be defined twice and its references belong to nobody.
FILENAME == obj_list {
	src = source_of($0)
	if (src in is_src) {
		src_of[$0] = src
		printf "obj\t%s\t%s\n", shown $0, src
	} else {
		printf "note\tignoring %s: no %s (stale object)\n", shown $0, src
	}
	next
}

{
	obj = $1
	sub(/:$/, "", obj)
	if (!(obj in src_of))
		next
	sym = $2
	type = $3
	# U is undefined; w and v are weak references that may stay
	# undefined.  Everything else with -g is a global definition.
	if (type == "U" || type == "w" || type == "v") {
		nref++
		ref_obj[nref] = obj
		ref_sym[nref] = sym
	} else if (!(sym in def)) {
		def[sym] = src_of[obj]
	}
}

END {
	for (i = 1; i <= nref; i++) {
		obj = ref_obj[i]
		sym = ref_sym[i]
		printf "sym\t%s\t%s\t%s\t%s\n", shown obj, src_of[obj], sym, \
		    (sym in def) ? def[sym] : ""
	}
}
EOF

# Reads the rules, the list of files under daemon/, then the records; prints
# one line per problem and a summary, exits 0, 1 (problems) or 99 (bad
# rules).
IFS= read -r -d '' CHECK_AWK <<'EOF'
BEGIN {
	FS = "\t"
	nrule = 0
	nonly = 0
	nlayer = 0
	nprob = 0
	# Outside daemon/, always known.
	builtin["common"] = 1
	builtin["proto"] = 1
}

function problem(msg) {
	print msg
	nprob++
}

function rule_error(msg) {
	print rules_shown ":" FNR ": " msg
	bad_rules = 1
}

# The folder (layer) a path belongs to: the first directory under daemon/,
# "top" for daemon/ itself; common and proto outside it.
function layer_of(p,   r) {
	if (p ~ /^common\//)
		return "common"
	if (p ~ /^proto\//)
		return "proto"
	r = substr(p, 8)
	if (index(r, "/") == 0)
		return "top"
	return substr(r, 1, index(r, "/") - 1)
}

# How the rules and the messages name a path: relative to daemon/.
function rel(p) {
	if (p ~ /^daemon\//)
		return substr(p, 8)
	return p
}

function dirname(p) {
	sub(/\/[^\/]*$/, "", p)
	return p
}

# A shell-like glob (* and ?) as an anchored regular expression.
function glob_re(g,   i, c, re) {
	re = "^"
	for (i = 1; i <= length(g); i++) {
		c = substr(g, i, 1)
		if (c == "*")
			re = re ".*"
		else if (c == "?")
			re = re "."
		else if (index("\\.[]()+^$|{}", c))
			re = re "\\" c
		else
			re = re c
	}
	return re "$"
}

# A deny target with a slash or a dot is a file (header or source) pattern
# relative to daemon/, anything else a folder.
function is_path(t) {
	return t ~ /[\/.*?]/
}

function is_layer(n) {
	return (n in declared) || (n in builtin)
}

# --- the rules file ---------------------------------------------------------
FILENAME == rules_file {
	line = $0
	sub(/#.*/, "", line)
	gsub(/^[ \t]+|[ \t]+$/, "", line)
	if (line == "")
		next
	n = split(line, w, /[ \t]+/)
	at = rules_shown ":" FNR
	if (w[1] == "layer" && n >= 2) {
		for (i = 2; i <= n; i++) {
			if (w[i] in declared || w[i] in builtin)
				rule_error("layer " w[i] " declared twice")
			declared[w[i]] = 1
			order[++nlayer] = w[i]
		}
	} else if ((w[1] == "deny" && n >= 3) || (w[1] == "uses" && n >= 2)) {
		nrule++
		r_kind[nrule] = w[1]
		r_from[nrule] = w[2]
		r_to[nrule] = ""
		for (i = 3; i <= n; i++)
			r_to[nrule] = r_to[nrule] " " w[i]
		r_to[nrule] = r_to[nrule] " "
		r_at[nrule] = at
	} else if (w[1] == "private" && n >= 2) {
		for (i = 2; i <= n; i++) {
			npriv++
			priv_re[npriv] = glob_re(w[i])
			priv_at[npriv] = at
		}
	} else if (w[1] == "only" && n >= 3) {
		nonly++
		only_sym[nonly] = w[2]
		only_sym_re[nonly] = glob_re(w[2])
		only_files[nonly] = w[3]
		only_re[nonly] = "(" glob_re(w[3]) ")"
		for (i = 4; i <= n; i++) {
			only_files[nonly] = only_files[nonly] " " w[i]
			only_re[nonly] = only_re[nonly] "|(" glob_re(w[i]) ")"
		}
		only_at[nonly] = at
	} else if (w[1] == "max-files" && n >= 2 && w[2] ~ /^[0-9]+$/) {
		if (n == 2) {
			max_default = w[2] + 0
			max_default_at = at
		}
		for (i = 3; i <= n; i++) {
			max_dir[w[i]] = w[2] + 0
			max_dir_at[w[i]] = at
		}
	} else if (w[1] == "allow-cycle" && n == 3) {
		ncyc++
		cyc_a[ncyc] = w[2]
		cyc_b[ncyc] = w[3]
		cyc_line[ncyc] = FNR
	} else if (w[1] == "objects" && n == 2) {
		# read by the shell script
	} else {
		rule_error("cannot read \"" line "\"")
	}
	next
}

# Names in rules must be declared layers: a typo would silently allow
# everything.  Run once the rules are read.
function validate_rules(   k, m, t, i) {
	validated = 1
	if (nlayer == 0) {
		print rules_shown ": no layer line"
		bad_rules = 1
	}
	for (k = 1; k <= nrule; k++) {
		if (!(r_from[k] in declared)) {
			print r_at[k] ": " r_from[k] " is no declared layer"
			bad_rules = 1
		}
		m = split(r_to[k], t, " ")
		for (i = 1; i <= m; i++) {
			if (r_kind[k] == "deny" && is_path(t[i]))
				continue
			if (!is_layer(t[i])) {
				print r_at[k] ": " t[i] " is no declared layer"
				bad_rules = 1
			}
		}
	}
	for (k = 1; k <= ncyc; k++) {
		if (!(cyc_a[k] in declared) || !(cyc_b[k] in declared)) {
			print rules_shown ":" cyc_line[k] ": allow-cycle names a layer that is not declared"
			bad_rules = 1
		}
	}
	for (d in max_dir) {
		if (d != "top" && !((d in declared) || (substr(d, 1, index(d "/", "/") - 1) in declared))) {
			print max_dir_at[d] ": " d " is in no declared layer"
			bad_rules = 1
		}
	}
	if (bad_rules) {
		aborted = 1
		exit 99
	}
	join_layers()
}

FNR == 1 && !validated {
	validate_rules()
}

# --- the files under daemon/ (the list also has common/ and proto/) --------
FILENAME == files_list && $0 !~ /^daemon\// {
	next
}

FILENAME == files_list {
	nfiles++
	l = layer_of($0)
	if (!(l in declared) && !(l in unknown_reported)) {
		unknown_reported[l] = 1
		where = (l == "top") ? "daemon/*" : "daemon/" l "/"
		problem(where ": folder " l " is no layer of " rules_shown \
		    " (add it to a \"layer\" line, with its rules)")
	}
	if ($0 ~ /\.c$/) {
		d = dirname($0)
		if (!(d in nc))
			dirs[++ndirs] = d
		nc[d]++
		csrc[++ncsrc] = $0
	}
	next
}

# --- dependency records -----------------------------------------------------

# An internal header (internal.h, or one named by a "private" line) may be
# included only from its own directory and the directories below it.
function check_private(what, from, target,   base, why, k, hdir, fdir) {
	base = target
	sub(/.*\//, "", base)
	why = ""
	if (base == "internal.h")
		why = "every internal.h"
	for (k = 1; k <= npriv && why == ""; k++)
		if (rel(target) ~ priv_re[k])
			why = priv_at[k]
	if (why == "")
		return
	hdir = dirname(target)
	fdir = dirname(from)
	if (fdir == hdir || index(fdir, hdir "/") == 1)
		return
	problem(what ": internal to " hdir "/ (" why ")")
}

# A reference to a restricted symbol from an object whose source matches
# none of the rule's files.
function check_only(what, src, sym,   k) {
	for (k = 1; k <= nonly; k++)
		if (sym ~ only_sym_re[k] && rel(src) !~ only_re[k])
			problem(what ": only " only_files[k] " may reference " \
			    only_sym[k] " (" only_at[k] ")")
}

# FROM (a file) depends on TARGET (a file): report the first rule, in the
# order of the rules file, that forbids it.  A dependency that no rule
# forbids becomes a folder edge for the cycle check; a forbidden one is
# already a problem, and leaving it out keeps the cycles to those that
# the rules alone would not catch.
function check_dep(what, from, target, verb,   fl, tl, k, m, t, i, msg) {
	fl = layer_of(from)
	tl = layer_of(target)
	if (!(fl in declared))
		return
	msg = ""
	for (k = 1; k <= nrule && msg == ""; k++) {
		if (r_from[k] != fl)
			continue
		if (r_kind[k] == "uses") {
			if (tl != fl && index(r_to[k], " " tl " ") == 0)
				msg = fl " may not depend on " tl
		} else {
			m = split(r_to[k], t, " ")
			for (i = 1; i <= m && msg == ""; i++) {
				if (is_path(t[i])) {
					if (rel(target) ~ glob_re(t[i]))
						msg = fl " may not " verb " " t[i]
				} else if (t[i] == tl && tl != fl) {
					msg = fl " may not depend on " tl
				}
			}
		}
		if (msg != "")
			problem(what ": " msg " (" r_at[k] ")")
	}
	if (msg == "" && tl != fl && is_layer(tl))
		add_edge(fl, tl, what)
}

$1 == "inc" {
	nincludes++
	what = $2 ":" $3 ": includes "
	if ($5 == "") {
		problem(what "\"" $4 "\", which resolves nowhere (searched " \
		    dirname($2) "/, daemon/, common/, proto/)")
		next
	}
	if ($4 == rel($5))
		what = what $4
	else
		what = what "\"" $4 "\" (" rel($5) ")"
	check_private(what, $2, $5)
	check_dep(what, $2, $5, "include")
	next
}

$1 == "obj" {
	nobjects++
	has_obj[$3] = 1
	next
}

$1 == "sym" {
	nrefs++
	what = $2 ": references " $4
	if ($5 != "")
		what = what " (" rel($5) ")"
	check_only(what, $3, $4)
	if ($5 != "")
		check_dep(what, $3, $5, "use")
	next
}

$1 == "note" {
	print "note: " $2
	next
}

# --- cycles -----------------------------------------------------------------
# The graph holds the folder edges that no rule forbids.  Folders joined by
# an allow-cycle line are one node, so a cycle between the two is allowed
# and any longer cycle through them is still found.

function node(l) {
	return (l in joined) ? joined[l] : l
}

function add_edge(a, b, what) {
	a = node(a)
	b = node(b)
	if (a == b)
		return
	if (!((a, b) in edge))
		edge[a, b] = what
}

# Groups of folders tied by allow-cycle lines, named by their members in
# rules order ("server+verbs").
function join_layers(   k, a, b, i, l, g, grp, gname) {
	for (i = 1; i <= nlayer; i++)
		grp[order[i]] = order[i]
	for (k = 1; k <= ncyc; k++) {
		a = grp[cyc_a[k]]
		b = grp[cyc_b[k]]
		if (a == b)
			continue
		for (i = 1; i <= nlayer; i++)
			if (grp[order[i]] == b)
				grp[order[i]] = a
	}
	for (i = 1; i <= nlayer; i++) {
		g = grp[order[i]]
		if (g in gname)
			gname[g] = gname[g] "+" order[i]
		else
			gname[g] = order[i]
	}
	for (i = 1; i <= nlayer; i++) {
		l = order[i]
		if (index(gname[grp[l]], "+"))
			joined[l] = gname[grp[l]]
	}
}

# Depth-first search in rules order; a grey node met again closes a cycle,
# which is printed once, starting at its earliest layer.
function dfs(u,   i, v) {
	color[u] = 1
	stack[++sp] = u
	for (i = 1; i <= nnode; i++) {
		v = nodes[i]
		if (!((u, v) in edge))
			continue
		if (color[v] == 1)
			report_cycle(v)
		else if (color[v] == 0)
			dfs(v)
	}
	sp--
	color[u] = 2
}

function report_cycle(v,   first, i, k, n, best, cyc, s) {
	for (first = sp; stack[first] != v; first--)
		;
	n = 0
	for (i = first; i <= sp; i++)
		cyc[++n] = stack[i]
	best = 1
	for (i = 2; i <= n; i++)
		if (rank[cyc[i]] < rank[cyc[best]])
			best = i
	s = ""
	for (k = 0; k < n; k++)
		s = s cyc[(best + k - 1) % n + 1] " -> "
	s = s cyc[best]
	if (s in cycle_seen)
		return
	cycle_seen[s] = 1
	problem("cycle: " s " (folders must not depend on each other; " \
	    "\"allow-cycle A B\" in " rules_shown " would permit a pair)")
	for (k = 0; k < n; k++) {
		i = (best + k - 1) % n + 1
		print "  " cyc[i] " -> " cyc[i % n + 1] ": " edge[cyc[i], cyc[i % n + 1]]
	}
}

function check_cycles(   i, l) {
	nnode = 0
	for (i = 1; i <= nlayer; i++) {
		l = node(order[i])
		if (!(l in rank)) {
			rank[l] = i
			nodes[++nnode] = l
		}
	}
	sp = 0
	for (i = 1; i <= nnode; i++)
		if (color[nodes[i]] == 0)
			dfs(nodes[i])
}

# --- file counts ------------------------------------------------------------

function check_max_files(   i, d, key, lim, at) {
	for (i = 1; i <= ndirs; i++) {
		d = dirs[i]
		key = (d == "daemon") ? "top" : rel(d)
		if (key in max_dir) {
			lim = max_dir[key]
			at = max_dir_at[key]
		} else if (max_default != "") {
			lim = max_default
			at = max_default_at
		} else {
			continue
		}
		if (nc[d] > lim)
			problem(d "/: " nc[d] " .c files, more than " lim " (" at ")")
	}
}

END {
	if (aborted)
		exit 99
	if (!validated)
		validate_rules()
	check_max_files()
	if (symbols == 1)
		for (i = 1; i <= ncsrc; i++)
			if (!(csrc[i] in has_obj))
				print "note: no object for " csrc[i] "; its symbols are not checked"
	check_cycles()
	summary = (nfiles + 0) " files, " (nincludes + 0) " includes"
	if (symbols == 1)
		summary = summary ", " (nobjects + 0) " objects, " (nrefs + 0) " symbol references"
	if (nprob) {
		printf "%s: %d problem%s (%s; rules: %s)\n", me, nprob, \
		    nprob == 1 ? "" : "s", summary, rules_shown
		exit 1
	}
	printf "%s: ok (%s)\n", me, summary
}
EOF

# --- the check --------------------------------------------------------------

# check_tree SRCDIR BUILDDIR RULES SYMBOLS(0|1)
check_tree() {
	local src=${1%/} build=${2%/} rules=$3 symbols=$4
	local tmp rules_shown build_shown build_abs prefix word value status
	local -a objects

	[ -d "$src/daemon" ] || die "no daemon/ in $src"
	[ -r "$rules" ] || die "cannot read rules $rules"
	command -v nm >/dev/null || [ "$symbols" = 0 ] || die "nm not found (binutils)"

	# Messages name the rules as the project does when they are its own.
	rules_shown=$rules
	case $rules in "$src"/*) rules_shown=${rules#"$src"/} ;; esac
	build_shown=$build/
	[ "$build" = . ] && build_shown=
	# The sources are read from inside the source tree: the build tree's
	# path must not depend on where we stand.
	build_abs=$(cd "$build" 2>/dev/null && pwd) || build_abs=$build

	tmp=$(mktemp -d) || die "mktemp failed"
	# shellcheck disable=SC2064 # expand now: tmp is local
	trap "rm -rf '$tmp'" EXIT

	# Everything works on paths relative to the source tree.
	(
		cd "$src" || exit 99
		find daemon common -name '.*' -prune -o -type f \( -name '*.c' -o -name '*.h' \) \
			-print 2>/dev/null | LC_ALL=C sort >"$tmp/files"
		if [ -d "$build_abs/proto" ]; then
			find "$build_abs/proto" -maxdepth 1 -name '*.h' -printf 'proto/%f\n' >>"$tmp/files"
		fi
		awk "$INCLUDES_AWK" "$tmp/files" >"$tmp/deps"
	) || die "reading the sources under $src/daemon failed"

	if [ "$symbols" = 1 ]; then
		# Objects are named after the program: ibverbsd-send.o.
		prefix=ibverbsd-
		while read -r word value _; do
			[ "$word" = objects ] && prefix=$value
		done <"$rules"
		(
			cd "$build_abs" 2>/dev/null &&
				find daemon -name '.*' -prune -o -type f -name "$prefix*.o" -print 2>/dev/null | LC_ALL=C sort
		) >"$tmp/objects"
		mapfile -t objects <"$tmp/objects"
		if [ "${#objects[@]}" = 0 ]; then
			die "no daemon objects ($build/daemon/**/$prefix*.o): build the daemon first" \
				"(or pass the build directory; --no-symbols checks includes only)"
		fi
		(cd "$build_abs" && nm -A -P -g -- "${objects[@]}" >"$tmp/nm") ||
			die "nm failed on the objects in $build/daemon"
		awk -v src_list="$tmp/files" -v obj_list="$tmp/objects" \
			-v prefix="$prefix" -v shown="$build_shown" "$SYMBOLS_AWK" \
			"$tmp/files" "$tmp/objects" "$tmp/nm" >>"$tmp/deps" ||
			die "reading nm output failed"
	fi

	awk -v rules_file="$rules" -v rules_shown="$rules_shown" \
		-v files_list="$tmp/files" -v symbols="$symbols" -v me="$me" \
		"$CHECK_AWK" "$rules" "$tmp/files" "$tmp/deps"
	status=$?
	rm -rf "$tmp"
	trap - EXIT
	return "$status"
}

# --- self-test --------------------------------------------------------------
# Builds a tiny tree in the same shape as the real one (folders under
# daemon/, objects named BUILD/daemon/<folder>/ibverbsd-<file>.o), checks
# that it passes, then breaks it one way at a time and checks that each
# break is reported with the expected message.

st_fail=0
st_n=0

# st_compile FILE...: compile daemon files of the case tree into its build.
st_compile() {
	local f obj
	for f; do
		obj=$case_dir/build/${f%/*}/ibverbsd-${f##*/}
		obj=${obj%.c}.o
		mkdir -p "${obj%/*}"
		"${cc[@]}" -c -w -I"$case_dir/src/daemon" -I"$case_dir/src/common" \
			-I"$case_dir/build/proto" -I"$case_dir/build" -o "$obj" "$case_dir/src/$f" || return 1
	done
}

# st_write FILE: the case tree's file, from standard input.
st_write() {
	mkdir -p "$(dirname "$case_dir/src/$1")"
	cat >"$case_dir/src/$1"
}

# st_append FILE: lines appended to a case file, which is recompiled if C.
st_append() {
	mkdir -p "$(dirname "$case_dir/src/$1")"
	cat >>"$case_dir/src/$1"
	case $1 in *.c) st_compile "$1" ;; esac
}

# st_include FILE HEADER: FILE gets one more include line.  The headers here
# only declare, so the object stays as it is and is not rebuilt.
st_include() {
	printf '#include "%s"\n' "$2" >>"$case_dir/src/$1"
}

# st_line FILE PATTERN: number of the first line of FILE matching PATTERN.
st_line() {
	grep -n -e "$2" "$1" | head -n 1 | cut -d: -f1
}

# st_rule PATTERN: "tests/layers.rules:N" for the self-test's rule matching
# PATTERN.
st_rule() {
	echo "tests/layers.rules:$(st_line "$st_root/clean/src/tests/layers.rules" "^$1")"
}

# st_case NAME: a fresh copy of the clean tree to break.
st_case() {
	case_name=$1
	case_dir=$st_root/case
	rm -rf "$case_dir"
	cp -R "$st_root/clean" "$case_dir"
}

st_run() {
	out=$(check_tree "$case_dir/src" "$case_dir/build" "$case_dir/src/tests/layers.rules" "${1:-1}" 2>&1)
	status=$?
}

st_report() {
	st_n=$((st_n + 1))
	if [ "$1" = ok ]; then
		echo "ok $st_n - $case_name"
	else
		echo "not ok $st_n - $case_name: $2"
		printf '%s\n' "$out" | sed 's/^/#   /'
		st_fail=1
	fi
}

# st_expect STATUS [MESSAGE...]: the check ends with STATUS and prints every
# MESSAGE as one whole line (the build tree's path shortened to BUILD/).
st_expect() {
	local want=$1 m shown
	shift
	st_run
	shown=$(printf '%s\n' "$out" | sed -e "s|$case_dir/build/|BUILD/|g")
	if [ "$status" != "$want" ]; then
		st_report fail "exit status $status, expected $want"
		return
	fi
	for m; do
		if ! printf '%s\n' "$shown" | grep -qxF -e "$m"; then
			st_report fail "no line: $m"
			return
		fi
	done
	st_report ok
}

st_make_clean_tree() {
	case_dir=$st_root/clean
	mkdir -p "$case_dir/build/proto" "$case_dir/src/common" "$case_dir/src/tests"
	echo 'struct demo_msg { int n; };' >"$case_dir/build/proto/demo.pb-c.h"

	st_write tests/layers.rules <<'EOF'
layer top conf core server verbs engine
objects ibverbsd-
# conf and core are the bottom
uses conf common proto
uses core conf common proto
deny engine server verbs top
uses engine core common proto
deny server top
deny verbs server/secret.h
private core/hidden.h
only conf_load* main.c
only conf_parse* conf/*
max-files 3
EOF
	st_write common/log.h <<'EOF'
#define LOG(x) ((void)(x))
EOF
	st_write daemon/conf/conf.h <<'EOF'
int conf_load(void);
EOF
	st_write daemon/conf/internal.h <<'EOF'
int conf_parse(const char *s);
EOF
	st_write daemon/conf/conf.c <<'EOF'
#include "conf.h"
#include "internal.h"
int conf_load(void) { return conf_parse("x"); }
EOF
	st_write daemon/conf/parse.c <<'EOF'
#include "internal.h"
int conf_parse(const char *s) { return s[0]; }
EOF
	st_write daemon/core/obj.h <<'EOF'
int obj_new(void);
EOF
	st_write daemon/core/hidden.h <<'EOF'
#define HIDDEN 1
EOF
	st_write daemon/core/obj.c <<'EOF'
#include "log.h"
#include "obj.h"
#include "hidden.h"
#include "../conf/conf.h"
int obj_count;
int obj_new(void) { LOG(0); return ++obj_count + HIDDEN; }
EOF
	st_write daemon/server/sess.h <<'EOF'
int sess_count(void);
EOF
	st_write daemon/server/secret.h <<'EOF'
#define SECRET 2
EOF
	st_write daemon/server/sess.c <<'EOF'
#include "core/obj.h"
#include "sess.h"
#include "secret.h"
int sess_count(void) { return obj_new() + SECRET; }
EOF
	st_write daemon/verbs/qp.h <<'EOF'
int qp_make(void);
EOF
	st_write daemon/verbs/qp.c <<'EOF'
#include "core/obj.h"
#include "engine/engine.h"
#include "server/sess.h"
#include "qp.h"
#include "demo.pb-c.h"
int qp_make(void) { struct demo_msg m = { 1 }; return sess_count() + eng_run() + m.n; }
EOF
	st_write daemon/engine/engine.h <<'EOF'
int eng_run(void);
EOF
	# The forbidden include in a comment must not count, even after a
	# character literal holding a double quote.
	st_write daemon/engine/run.c <<'EOF'
#include "core/obj.h"
#include "engine.h"
static const char quote = '"'; /* the next line is no include:
#include "server/sess.h"
*/
// #include "verbs/qp.h"
int eng_run(void) { return obj_new() + quote; }
EOF
	st_write daemon/main.c <<'EOF'
#include <stdio.h>
#include "config.h"
#include "conf/conf.h"
#include "core/obj.h"
#include "server/sess.h"
#include "verbs/qp.h"
int main(void) { return conf_load() + sess_count() + qp_make(); }
EOF
	# autoconf's config.h, found only through the build directory.
	echo '#define HAVE_NOTHING 1' >"$case_dir/build/config.h"
	st_compile daemon/main.c daemon/conf/conf.c daemon/conf/parse.c \
		daemon/core/obj.c daemon/server/sess.c daemon/verbs/qp.c \
		daemon/engine/run.c || return 1

	# Objects that are not the daemon's must be ignored: a unit test's
	# copy of a source, and a leftover of a removed file.
	printf '%s\n' 'extern int sess_count(void);' 'int t(void) { return sess_count(); }' \
		>"$st_root/other.c"
	"${cc[@]}" -c -w -o "$case_dir/build/daemon/engine/tests_unit_test_run-run.o" "$st_root/other.c" &&
		"${cc[@]}" -c -w -o "$case_dir/build/daemon/engine/ibverbsd-gone.o" "$st_root/other.c"
}

self_test() {
	local f
	# $CC may hold options: a command and its words.
	read -r -a cc <<<"${CC:-cc}"
	if ! command -v "${cc[0]}" >/dev/null; then
		echo "$me: no C compiler (${cc[*]}), self-test skipped"
		exit 77
	fi
	st_root=$(mktemp -d) || die "mktemp failed"
	# shellcheck disable=SC2064 # expand now
	trap "rm -rf '$st_root'" EXIT
	st_make_clean_tree || die "could not build the synthetic tree"

	st_case "clean tree passes"
	st_expect 0 "note: ignoring BUILD/daemon/engine/ibverbsd-gone.o: no daemon/engine/gone.c (stale object)"

	st_case "forbidden include"
	st_include daemon/engine/run.c "server/sess.h"
	st_expect 1 "daemon/engine/run.c:8: includes server/sess.h: engine may not depend on server ($(st_rule 'deny engine'))"

	st_case "forbidden include by a relative path"
	st_include daemon/engine/run.c "../verbs/qp.h"
	st_expect 1 "daemon/engine/run.c:8: includes \"../verbs/qp.h\" (verbs/qp.h): engine may not depend on verbs ($(st_rule 'deny engine'))"

	st_case "forbidden include outside a deny line (uses)"
	st_include daemon/engine/run.c "conf/conf.h"
	st_expect 1 "daemon/engine/run.c:8: includes conf/conf.h: engine may not depend on conf ($(st_rule 'uses engine'))"

	st_case "forbidden symbol through an extern declaration"
	st_append daemon/engine/run.c <<<'extern int sess_count(void); int eng_peek(void) { return sess_count(); }'
	st_expect 1 "BUILD/daemon/engine/ibverbsd-run.o: references sess_count (server/sess.c): engine may not depend on server ($(st_rule 'deny engine'))"

	st_case "forbidden data symbol"
	st_append daemon/conf/parse.c <<<'extern int obj_count; int conf_peek(void) { return obj_count; }'
	st_expect 1 "BUILD/daemon/conf/ibverbsd-parse.o: references obj_count (core/obj.c): conf may not depend on core ($(st_rule 'uses conf'))"

	st_case "forbidden header by name (deny PATH)"
	st_include daemon/verbs/qp.c "server/secret.h"
	st_expect 1 "daemon/verbs/qp.c:7: includes server/secret.h: verbs may not include server/secret.h ($(st_rule 'deny verbs'))"

	st_case "cycle"
	st_append daemon/server/sess.c <<<'extern int qp_make(void); int sess_poke(void) { return qp_make(); }'
	st_expect 1 "cycle: server -> verbs -> server (folders must not depend on each other; \"allow-cycle A B\" in tests/layers.rules would permit a pair)" \
		"  server -> verbs: BUILD/daemon/server/ibverbsd-sess.o: references qp_make (verbs/qp.c)" \
		"  verbs -> server: daemon/verbs/qp.c:3: includes server/sess.h"

	st_case "cycle allowed by allow-cycle"
	st_append daemon/server/sess.c <<<'extern int qp_make(void); int sess_poke(void) { return qp_make(); }'
	echo 'allow-cycle verbs server' >>"$case_dir/src/tests/layers.rules"
	st_expect 0

	st_case "longer cycle through an allowed pair"
	st_append daemon/server/sess.c <<<'extern int qp_make(void); int sess_poke(void) { return qp_make(); }'
	echo 'allow-cycle verbs server' >>"$case_dir/src/tests/layers.rules"
	st_append daemon/core/obj.c <<<'extern int sess_count(void); int obj_poke(void) { return sess_count(); }'
	sed -i 's/^uses core .*/uses core conf server common proto/' "$case_dir/src/tests/layers.rules"
	st_expect 1 "cycle: core -> server+verbs -> core (folders must not depend on each other; \"allow-cycle A B\" in tests/layers.rules would permit a pair)"

	st_case "restricted symbol (only)"
	st_append daemon/server/sess.c <<<'extern int conf_load(void); int sess_reload(void) { return conf_load(); }'
	st_expect 1 "BUILD/daemon/server/ibverbsd-sess.o: references conf_load (conf/conf.c): only main.c may reference conf_load* ($(st_rule 'only conf_load'))"

	st_case "too many files"
	for f in a b c; do
		st_append "daemon/engine/$f.c" <<<"int eng_$f(void) { return 0; }"
	done
	st_expect 1 "daemon/engine/: 4 .c files, more than 3 ($(st_rule 'max-files'))"

	st_case "internal.h outside its folder"
	st_include daemon/server/sess.c "conf/internal.h"
	st_expect 1 "daemon/server/sess.c:5: includes conf/internal.h: internal to daemon/conf/ (every internal.h)"

	st_case "private header outside its folder"
	st_include daemon/server/sess.c "core/hidden.h"
	st_expect 1 "daemon/server/sess.c:5: includes core/hidden.h: internal to daemon/core/ ($(st_rule 'private'))"

	st_case "include that resolves nowhere"
	st_include daemon/core/obj.c nowhere.h
	st_expect 1 "daemon/core/obj.c:7: includes \"nowhere.h\", which resolves nowhere (searched daemon/core/, daemon/, common/, proto/)"

	st_case "folder that is no layer"
	st_append daemon/extra/x.c <<<'int x(void) { return 0; }'
	st_expect 1 "daemon/extra/: folder extra is no layer of tests/layers.rules (add it to a \"layer\" line, with its rules)"

	st_case "typo in the rules"
	echo 'deny engine sever' >>"$case_dir/src/tests/layers.rules"
	st_expect 99 "tests/layers.rules:$(st_line "$case_dir/src/tests/layers.rules" 'sever'): sever is no declared layer"

	st_case "no objects: the symbol check fails loudly"
	rm -rf "$case_dir/build/daemon"
	st_expect 99 "$me: no daemon objects (BUILD/daemon/**/ibverbsd-*.o): build the daemon first (or pass the build directory; --no-symbols checks includes only)"

	st_case "no objects, includes only (--no-symbols)"
	rm -rf "$case_dir/build/daemon"
	st_run 0
	if [ "$status" = 0 ]; then st_report ok; else st_report fail "exit status $status"; fi

	rm -rf "$st_root"
	trap - EXIT
	echo "1..$st_n"
	return "$st_fail"
}

# --- main -------------------------------------------------------------------

main() {
	local rules="" symbols=1 src build
	while [ $# -gt 0 ]; do
		case $1 in
		--self-test)
			self_test
			exit
			;;
		--rules)
			[ $# -ge 2 ] || usage 99
			rules=$2
			shift
			;;
		--no-symbols) symbols=0 ;;
		-h | --help) usage 0 ;;
		-*) usage 99 ;;
		*) break ;;
		esac
		shift
	done
	[ $# -le 2 ] || usage 99
	src=${1:-${top_srcdir:-.}}
	build=${2:-${top_builddir:-$src}}
	check_tree "$src" "$build" "${rules:-$src/tests/layers.rules}" "$symbols"
}

main "$@"
