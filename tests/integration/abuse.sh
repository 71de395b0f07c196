#!/bin/bash
# A client abusing its own objects (abuse-helper, tests/integration/abuse.c)
# as uid $USER1: an XRC target's SQ written, an XRC SRQ destroyed or
# renamed under a message, an opener of a waiting target closing on
# another engine thread, a receiver holding its SRQ's claim for ever, or
# its UD QP's while another QP floods it (the engine waits the claim out
# once, not for every datagram: claim_timeouts), or holds it a
# millisecond at a time (a receiver preempted mid-copy: its datagrams
# wait, none is lost, no claim is waited out), the same in five contexts
# at once (one share of each thread's park for the uid), an SRQ's
# claim word set to ENGINE by its client (no spin, one wait a millisecond
# for the whole SRQ), a multicast group whose members all hold their
# claims (one claim waited out a pass on the sending thread, not one a
# copy), a QP destroyed with 2 GiB of WRITEs in its SQ (the destroy runs
# 16 MiB of them at most: the engine's bytes), a process that exits
# with 160 QPs of 32 MiB of WRITEs and one with a last 8-byte WRITE (its context's
# teardown runs 16 MiB in all, the 8 bytes among them, and another
# tenant is served after), the same with one WRITE of 1 MiB in each of
# 160 SQs (the 8 bytes first all the same), one that exits with 48 direct rings full
# towards it (its teardown takes 16 MiB of them in all: the engine's
# direct_bytes), or dies holding the claims of the receive queues those
# rings are for (a turn of the budget a round each, bounded; nothing
# taken, its own last send sent), a QP in error whose SQ
# fills with 4,096 WQEs at once (flushed 256 a turn: the engine's
# turns), a WRITE onto its own source, or a kick eventfd made blocking
# with a full counter (the daemon's doorbells never wait on it).  The
# daemon serves on, and each abuse fails only the abuser's own work.  Two
# engine threads (contexts spread over both) and no memlock bound, for
# 64 MiB messages.  Also a CQ whose client writes an impossible head,
# then resizes it (the resize keeps nothing), and a client (root, for its
# own /proc/self/map_files) that keeps its ring arena's file past its
# context (the daemon gives the pages back anyway).  ABUSE_MODES: a
# comma-separated subset.
. "$(dirname "$0")/lib.sh"

ibvd_init
O=$T/out
HELPER=$T/bin/abuse-helper
[ -x "$HELPER" ] || fail "tests/integration/abuse-helper not built"
export VT_TMUL=$TMUL

conf=$(conf_edit "$T/abuse.conf" "cfg.setdefault('engine', {})['threads'] = 2" \
	"cfg['rlimit_memlock'] = 'ignore'") || exit 1
daemon_start -c "$conf"
daemon_wait_ready

IFS=, read -ra modes <<<"${ABUSE_MODES:-tgt-sq err,tgt-sq rts,srq-gone,srqn-rewrite,opener-closes,srq-claim,ud-claim,ud-claim-brief,ud-claim-park,ud-park-reset,ud-park-share,ud-forged-sl,ud-park-mcast,cq-head-lie,cq-head-reset,cq-span-xrc,cq-head-teardown,keep-rings,srq-forged-claim,mcast-claims,mcast-srq,mcast-contend,mcast-fanout,mcast-fanout paced,full-sq-destroy,full-sq-exit,full-sq-exit-long,full-direct-exit,full-direct-exit-held,err-flush,overlap,kick-jam}"
for mode in "${modes[@]}"; do
	check "a client abuses its own objects: $mode"
	waits=$(engine_count claim_timeouts)
	parked=$(engine_count ud_parked)
	ibvctl statistic show engine >"$O/engine.before" 2>&1
	bytes=$(engine_count bytes)
	direct=$(engine_count direct_bytes)
	turns=$(engine_count turns)
	purged=$(engine_count purge_slots)
	# the 64 MiB SEND the SRQ cases interrupt: a second at 64 MB/s, so
	# that a helper preempted mid-look still finds it under way
	case $mode in
	"mcast-fanout paced") pace=4000000 ;;
	srq-gone | srqn-rewrite) pace=64000000 ;;
	*) pace= ;;
	esac
	if [ -n "$pace" ]; then
		ibvctl limit set uid "$USER1" bandwidth=$pace >"$O/set" 2>&1 ||
			{ show "limit set" "$O/set"; fail "limit set uid $USER1 bandwidth=$pace"; }
	fi
	# An abuser leaves its objects to the daemon, and its own structs
	# unfreed: leaks a sanitizer build would otherwise report.
	# shellcheck disable=SC2086 # mode: words
	# keep-rings opens its own /proc/self/map_files, which takes root
	who=$USER1
	[ "$mode" = keep-rings ] && who=0
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
		run_ours "$who" "$HELPER" $mode >"$O/abuse" 2>&1
	rc=$?
	[ "$rc" -eq 0 ] || { show "abuse-helper $mode" "$O/abuse"; fail "$mode: exit $rc"; }
	daemon_alive "after $mode"
	# 64 datagrams of 4 KiB, 32 copies each (8 MiB) at 4 MB/s: 2 s; the
	# datagrams alone (256 KiB) would take 65 ms
	if [ -n "$pace" ]; then
		ibvctl limit set uid "$USER1" bandwidth=max >"$O/set" 2>&1 ||
			{ show "limit set" "$O/set"; fail "limit set uid $USER1 bandwidth=max"; }
	fi
	if [ "$mode" = "mcast-fanout paced" ]; then
		ms=$(sed -n 's/.* in \([0-9]*\) ms$/\1/p' "$O/abuse")
		[ -n "$ms" ] && [ "$ms" -ge 1500 ] ||
			fail "$mode: 8 MiB of copies at 4 MB/s took ${ms:-?} ms"
	fi
	waits=$(($(engine_count claim_timeouts) - waits))
	# its 3 CQEs' slots, then nothing for the RESETs with the lying head
	# (50 walks of 2 Mi slots before)
	purged=$(($(engine_count purge_slots) - purged))
	[ "$mode" != cq-head-reset ] || [ "$purged" -le 3 ] ||
		fail "$mode: the RESETs looked at $purged CQ slots"
	# the target's one CQE in the CQ it is reset on (2^32 before)
	[ "$mode" != cq-span-xrc ] || [ "$purged" -le 1 ] ||
		fail "$mode: the target's RESET looked at $purged CQ slots"
	# 8192 datagrams, each one waited out before: a quarter at most
	[ "$mode" != ud-claim ] || [ "$waits" -le 2048 ] ||
		fail "$mode: the engine waited out the claim $waits times"
	# a claim held briefly, again and again: datagrams wait, none dropped
	# (but in a burst whose hold our sleep made much longer)
	if [ "$mode" = ud-claim-brief ]; then
		strict=$(sed -n 's/.* none lost in the \([0-9]*\) bursts .*/\1/p' "$O/abuse")
		[ -n "$strict" ] && [ "$waits" -le $((32 - strict)) ] ||
			fail "$mode: the engine gave up on the claim $waits times (${strict:-?} bursts held 3 ms at most)"
	fi
	# a held claim: nothing waited out, every datagram parked (unless held
	# so long, on a loaded machine, that they expired)
	if [ "$mode" = ud-claim-park ]; then
		parked=$(($(engine_count ud_parked) - parked))
		grep -q '(lenient)$' "$O/abuse" || [ "$waits" -eq 0 ] ||
			fail "$mode: the engine waited out the claim $waits times"
		[ "$parked" -ge 16 ] || fail "$mode: $parked datagrams parked, want 16"
	fi
	# one uid's held claims in five contexts: one share of each thread's
	# park (256), not one a context (1,024 a thread before 97e3084), if
	# none expired to make room (all sent within a datagram's 500 ms)
	if [ "$mode" = ud-park-share ]; then
		parked=$(($(engine_count ud_parked) - parked))
		nthreads=$(ibvctl statistic show engine | grep -c ud_parked)
		ms=$(sed -n 's/.* all sent in \([0-9]*\) ms$/\1/p' "$O/abuse")
		[ "$parked" -ge 256 ] || fail "$mode: $parked datagrams parked, want 256 at least"
		[ -n "$ms" ] && { [ "$ms" -ge 400 ] || [ "$parked" -le $((256 * nthreads)) ]; } ||
			fail "$mode: $parked datagrams parked on $nthreads threads in ${ms:-?} ms, want 256 a thread at most"
		log "$mode: $parked parked on $nthreads engine threads in $ms ms"
	fi
	# a forged claim word: waited out once a millisecond for the SRQ
	if [ "$mode" = srq-forged-claim ]; then
		ms=$(sed -n 's/.* in \([0-9]*\) ms$/\1/p' "$O/abuse")
		[ -n "$ms" ] && [ "$waits" -le $((ms + 2)) ] ||
			fail "$mode: the engine waited out the claim $waits times in ${ms:-?} ms"
	fi
	# 64 datagrams to 32 members whose claims are held: each copy waited
	# for its claim before (2048 waits); now a pass waits for one at most,
	# and a pass that sends has a turn: per engine thread, waits <= turns
	if [ "$mode" = mcast-claims ]; then
		ibvctl statistic show engine >"$O/engine.after" 2>&1
		worst=$(awk 'FNR == NR { for (i = 1; i < NF; i++) b[$2, $i] = $(i + 1); next }
			{ w = 0; t = 0
			  for (i = 1; i < NF; i++) {
				if ($i == "claim_timeouts") w = $(i + 1) - b[$2, $i]
				if ($i == "turns") t = $(i + 1) - b[$2, $i]
			  }
			  if (w > m) { m = w; mt = t } }
			END { printf "%d %d\n", m, mt }' "$O/engine.before" "$O/engine.after")
		read -r waited turns_there <<<"$worst"
		[ "$waited" -ge 1 ] || fail "$mode: no claim was waited out (did the copies find them held?)"
		[ "$waited" -le "$turns_there" ] ||
			fail "$mode: one engine thread waited out $waited claims in $turns_there turns"
	fi
	# 64 datagrams, each a turn's worth of copies: 64 turns or so
	turns=$(($(engine_count turns) - turns))
	[ "${mode% paced}" != mcast-fanout ] || [ "$turns" -ge 60 ] ||
		fail "$mode: the 64 datagrams took $turns turns: their copies went uncounted"
	# 4,096 WQEs to flush: 256 a turn (ENG_FLUSH_WQES), 16 turns at least
	[ "$mode" != err-flush ] || [ "$turns" -ge 16 ] ||
		fail "$mode: 4,096 WQEs flushed in $turns turns"
	# 2 GiB in the SQ; a destroy may still run 16 MiB of it
	bytes=$(($(engine_count bytes) - bytes))
	[ "$mode" != full-sq-destroy ] || [ "$bytes" -le $((17 << 20)) ] ||
		fail "$mode: the destroy moved $bytes bytes"
	# 160 QPs with 32 MiB (or 1 MiB) each in their SQs, and 8 bytes: the context's
	# teardown runs 16 MiB of them in all (16 MiB each before)
	case $mode in full-sq-exit*)
		[ "$bytes" -le $((17 << 20)) ] || fail "$mode: the context's teardown moved $bytes bytes" ;;
	esac
	# 48 direct rings of 960 KiB towards the child: its teardown takes
	# 16 MiB of them in all (each ring whole before: 45 MiB)
	direct=$(($(engine_count direct_bytes) - direct))
	[ "$mode" != full-direct-exit ] || [ "$direct" -le $((17 << 20)) ] ||
		fail "$mode: the context's teardown placed $direct bytes from direct rings"
	# the same, the child's receive queues' claims held by its dead
	# library: none of the rings taken, only the child's own 8 bytes; its
	# teardown ended (a turn a round for each held claim, 4,096 in all)
	[ "$mode" != full-direct-exit-held ] || [ "$direct" -le 8 ] ||
		fail "$mode: the context's teardown placed $direct bytes past claims held"
	if [ "${mode#full-sq-exit}" != "$mode" ] || [ "${mode#full-direct-exit}" != "$mode" ]; then
		# another tenant, served afterwards
		ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
			run_ours "$USER2" "$HELPER" overlap >"$O/other" 2>&1 ||
			{ show "abuse-helper overlap as $USER2" "$O/other"; fail "$mode: another tenant's WRITE"; }
	fi
	ok "$(tail -n 1 "$O/abuse") (claim waited out $waits times, $bytes bytes moved, $direct from direct rings, $turns turns)"
done

nothing_left "after the abusers left"
daemon_stop
