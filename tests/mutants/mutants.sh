#!/usr/bin/env bash
# mutants.sh: the mutation check (`make mutants`; part of the soak, never of
# `make test`). Each mutant below is one small change to protocol code that
# breaks a promise of docs/reliability.md. For each, on a temporary copy of
# the tree (never the working tree), the script applies the change, then
# runs
#   1. the simulation at its default CI budget (go test ./tests/sim), and
#   2. the package tests named with the mutant,
# and requires BOTH to fail by an assertion (a "--- FAIL" test; a mutant
# marked NOSIM, below, the package tests alone): a run
# that passes, that fails only by timing out (a hang), or that does not
# build lets the mutant survive. A mutant whose
# change no longer applies (the code moved) fails the script too: update
# its pattern. Exit status: 0 when every mutant is caught.
#
#   tests/mutants/mutants.sh            # every mutant
#   tests/mutants/mutants.sh NAME...    # only these
#   MUTANT_TIMEOUT=300 tests/mutants/mutants.sh
#   MUTANT_DRY=1 tests/mutants/mutants.sh   # only check each applies and builds
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
timeout_s=${MUTANT_TIMEOUT:-300}

# mutant NAME FILE "PACKAGE TESTS" PERL [NOSIM]: a perl -0 substitution on
# FILE. NOSIM (a reason) runs the package tests only: for a mutant whose
# effect is no broken promise the simulation can see, only a difference
# from a reference the package tests hold (say why).
names_all=() files=() pkgs_all=() exprs=() nosims=()
mutant() { names_all+=("$1"); files+=("$2"); pkgs_all+=("$3"); exprs+=("$4"); nosims+=("${5:-}"); }
# (shared/star's own tests hang on this one rather than fail: the fault
# matrix's TestFault_AckWaitsForWCopies is its package test.)
mutant star-acks-at-w-1 shared/star/commit.go "./tests/faults" \
  's/if confirmed == w \{/if confirmed == w-1 {/'
mutant read-drops-last-record shared/read/read.go "./shared/read ./tests/linear" \
  's/return Result\{Records: out, Tail: tail,/return Result{Records: out[:max(len(out)-1, 0)], Tail: tail,/'
mutant trim-deletes-one-extra-slot shared/trim/trim.go "./shared/trim" \
  's/for slot := first; slot < end; slot\+\+ \{/for slot := first; slot < end+1; slot++ {/'
mutant absorb-drops-a-ref shared/absorb/absorb.go "./shared/absorb" \
  's/\treturn refs, nil\n/\treturn refs[:max(len(refs)-1, 0)], nil\n/'
mutant absorb-lastseq-one-short shared/absorb/absorb.go "./shared/absorb" \
  's/\n\treturn refs, nil\n/\n\tfor i := range refs {\n\t\trefs[i].LastSeq--\n\t}\n\treturn refs, nil\n/'
mutant fence-skips-poison-write shared/chain/chain.go "./shared/chain" \
  's/err := s.Buckets\[op.Bucket\].PutIfAbsent\(ctx, key, poison\)/err, _ := error(nil), poison/'
# (shared/star's own tests pass with this one: the fault matrix's
# TestFault_AcksReleaseInSlotOrder is its package test.)
mutant ack-released-out-of-slot-order shared/star/loglet.go "./tests/faults" \
  's/(\tfrom, to := l.ord.markDurable\(f.slot\)\n)/$1\tif f.slot >= to {\n\t\tfor _, b := range f.batches {\n\t\t\tb.finish(Ack{FirstSeq: b.first, LastSeq: b.first + uint64(b.recs) - 1}, nil)\n\t\t}\n\t}\n/; s/(func \(b \*batch\) finish\(a Ack, err error\) \{\n)/$1\tselect {\n\tcase <-b.done:\n\t\treturn\n\tdefault:\n\t}\n/'
mutant settle-swaps-refs-unconditionally shared/metastore/mem.go "./shared/metastore ./shared/settle" \
  's/if !ok \|\| !EqualRef\(cur, o\) \{/if false \&\& (!ok || !EqualRef(cur, o)) {/'
mutant fence-check-skipped shared/star/loglet.go "./shared/star" \
  's/if err := st.checkFence\(b\); err != nil \{/if err := st.checkFence(b); err != nil \&\& b.cmd != nil {/'
mutant successor-forgets-commands shared/star/reopen.go "./shared/star" \
  's/if last.Commands != nil \{/if last.Commands != nil \&\& false {/'
mutant read-ignores-trim shared/read/read.go "./shared/read" \
  's/if from < trim \{/if from < trim \&\& false {/'
mutant successor-forgets-dedupe shared/star/reopen.go "./shared/star" \
  's/info.Producers = producerStates\(metastore.UnionMarks\(lists...\), /info.Producers = producerStates(nil, /'
mutant trim-reads-last-refs-config shared/trim/trim.go "./shared/trim" \
  's/last, err = t.window\(\).LastRef\(ctx, st\)/last, err = t.Meta.LastRef(ctx, st.ID)/'
# Issue 30: a run's packs at keys without its plan's digest (a dead plan's
# packs collide with a live one's: ErrForeign forever); the simulation's
# copies alternate two settle configurations (tests/sim/world.go).
mutant settle-pack-key-without-digest shared/settle/runs.go "./shared/settle" \
  's/run.Digest = planDigest\(run, ids, maxBytes, sorted, [^\n]*\n/run.Digest = 0\n/'
# Issue 30, one commit point per step: the step's commit split in two
# writes (settled, then flushed and merged), so a crash or a racing copy
# leaves a head that is half a step (what finishHead used to finish).
# Every copy still plans alike on such a head and, with digests, a plan
# on it is garbage, not a collision: the package tests see the heads
# (TestSettleHeadsAreWholeSteps: every stored head is a crash-free run's).
mutant settle-commit-split shared/settle/settle.go "./shared/settle" \
  's/\terr := s.Meta.MoveCursors\(ctx, c, \[\]metastore.CursorMove\{\n\t\t\{Kind: metastore.Settled, From: h.Settled, To: settled\},/\tif err := s.Meta.MoveCursors(ctx, c, []metastore.CursorMove{{Kind: metastore.Settled, From: h.Settled, To: settled}}); err != nil {\n\t\tif errors.Is(err, metastore.ErrConflict) {\n\t\t\tres.Lost = true\n\t\t\treturn nil\n\t\t}\n\t\treturn err\n\t}\n\th.Settled = settled\n\tif flushed == h.Flushed \&\& merged == h.Merged {\n\t\treturn nil\n\t}\n\terr := s.Meta.MoveCursors(ctx, c, []metastore.CursorMove{\n\t\t{Kind: metastore.Settled, From: h.Settled, To: settled},/' \
  "a half-step head is planned on alike by every copy; its plans are garbage, not a broken promise"
# The store's MoveCursors checking only its first move's condition (the
# settled cursor): a quiet flush's seal and flushed move land after a
# new pass, and a stale copy's merged and flushed moves over another's.
mutant metastore-move-checks-first-only shared/metastore/moves.go "./shared/metastore ./shared/settle" \
  's/\tfor _, m := range moves \{\n\t\tif cur := h.Cursor\(m.Kind\); cur != m.From \{/\tfor _, m := range moves[:1] {\n\t\tif cur := h.Cursor(m.Kind); cur != m.From {/' \
  "the conformance suite catches it; in the simulation TestSimEdges' settlement loops forever in its bubble (a hang, not an assertion)"
# Issue 30, flush settings across a deploy (ADR 0063, amendment):
# SettleRef without its neighbour condition: a copy that merges a
# stream's previous ref and one that does not both write (refs overlap).
mutant metastore-settle-ref-ignores-neighbours shared/metastore/keys.go "./shared/metastore ./shared/settle" \
  's/(func SettleApart\([^\n]*\{\n)/$1\tif true {\n\t\treturn nil\n\t}\n/'
# Issue 30, quiet chains (ADR 0057): the quiet flush without its seal
# against merges (a merge compacts across the end of a quiet ref:
# ErrMismatch), with a seal not conditioned on the checkpoint (a copy
# that planned on a new pass merges the sealed runs), and without the
# quiet flush (a quiet chain's runs wait for its next append: the
# simulation's drain requires them flushed).
mutant settle-quiet-flush-skips-seal shared/settle/quiet.go "./shared/settle" \
  's/if h.Merged.Less\(h.Settled\) \{/if false \&\& h.Merged.Less(h.Settled) {/' \
  "the simulation never cuts a quiet flush short before a merge (it passed at the default budget)"
mutant settle-quiet-seal-ignores-checkpoint shared/settle/quiet.go "./shared/settle" \
  's/\[\]metastore.CursorMove\{at, still, \{Kind: metastore.Merged, From: h.Merged, To: sealed\}\}/[]metastore.CursorMove{at, {Kind: metastore.Merged, From: h.Merged, To: sealed}}/' \
  "it needs a pass absorbed, planned and merged between a quiet flush's head read and its seal; no simulation schedule is known to produce it"
mutant settle-no-quiet-flush shared/settle/quiet.go "./shared/settle ./shared/trim" \
  's/if s.Clock == nil \{/if true {/'
# Issue 30 item 4: a merge that drops its entries' producer marks (a
# retry after a takeover of a batch whose marks were merged is appended
# twice); the simulation's lost acks retried after merges catch it
# (tests/sim mergeTakeover: 35 of 100 seeds), and
# TestSettleMergeKeepsProducerMarks.
mutant settle-merge-drops-marks shared/settle/mergeresume.go "./shared/settle" \
  's/\tif len\(marks\) > 0 \{\n\t\tfor _, m := range metastore.TrimMarks\(marks\) \{/\tif false \&\& len(marks) > 0 {\n\t\tfor _, m := range metastore.TrimMarks(marks) {/'
# Issue 32, stream moves (ADR 0065): a moved stream's last part taken from
# the windows even when its refs are newer (the new leader reopens the
# stream at a stale tail: TestSimMoves seed 6;
# server.TestReview3ReopenAfterOneChainSettled every time); the seal not checked at
# admission (the old star would sequence batches after its seal; the
# server drains at once after the seal, so only the star's tests see
# it); two moves of one stream at once (the simulation moves one at a
# time).
mutant moved-window-last-part-wins shared/passindex/window.go "./shared/server -run ^TestReview3ReopenAfterOneChainSettled\$" \
  's/if len\(parts\) > 0 && !moved\(st\) \{/if len(parts) > 0 {/'
# A stream's tail recovered from its last ref alone when it has one
# (passindex.Window.LastRef ignoring its newest parts, still in the
# window's passes and runs): a successor reopens the stream below seqs it
# acknowledged. TestSimEdges' recovery probe (a successor's recovery at
# every few virtual ms, against the star's flight index) sees it at once;
# trim's TestWindowCommandsApply the stale command state.
mutant successor-tail-from-refs-only shared/passindex/window.go "./shared/trim" \
  's/if len\(parts\) > 0 && !moved\(st\) \{\n\t\treturn parts\[len\(parts\)-1\], nil\n\t\}\n\tlast, err := w.Meta.LastRef\(ctx, st.ID\)\n/if len(parts) > 0 \&\& !moved(st) \&\& false {\n\t\treturn parts[len(parts)-1], nil\n\t}\n\tlast, err := w.Meta.LastRef(ctx, st.ID)\n\tif err == nil {\n\t\treturn last, nil\n\t}\n/'
mutant seal-not-checked shared/star/commands.go "./shared/star" \
  's/if to, ok := MoveTarget\(cur\); ok \{/if to, ok := MoveTarget(cur); ok \&\& false {/' \
  "the server drains the stream right after its seal: no batch reaches admission in between"
mutant concurrent-moves shared/server/move.go "./shared/server" \
  's/if busy\[id\] \{/if false \&\& busy[id] {/' \
  "the simulation's mover runs one move at a time"
# A fenced stream's token lost across a move (the new star unseals it to
# no token: the writer's appends are refused, a stale one accepted):
# TestSimMoves' fenced seeds and star.TestMoveFencedStream. A move to a
# star without the stream's class let through: the simulation's stars
# have both classes, so only the server's tests see it.
mutant seal-drops-fencing-token shared/star/move.go "./shared/star" \
  's/\t\tc.FenceToken = displaced\n/\t\tc.FenceToken = ""\n\t\t_ = displaced\n/'
mutant target-class-not-checked shared/server/move.go "./shared/server" \
  's/if errors.Is\(err, metastore.ErrNotFound\) \{\n\t\treturn connect.NewError\(connect.CodeFailedPrecondition, fmt.Errorf\("%w: stream %q is of class/if false \&\& errors.Is(err, metastore.ErrNotFound) {\n\t\treturn connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%w: stream %q is of class/' \
  "the simulation's two stars have both classes' bucket sets"
# Review 3 (ADR 0076): a move to a star that does not serve let through,
# and a move that failed after its seal left for an operator's retry.
# The simulation's mover retries an interrupted move itself and restarts
# every star before its checks, so only the server's tests see them.
mutant move-target-not-probed shared/server/move_target.go "./shared/server -run ^TestReview3MoveToADownStar\$" \
  's/if err := up\(ctx, to, s.cfg.Peers\[to\]\); err != nil \{/if err := up(ctx, to, s.cfg.Peers[to]); err != nil \&\& false {/' \
  "the simulation restarts every star before its checks and its mover finishes an interrupted move"
# A refs-mode settle step that takes another chain's refs of a stream
# moved away and back for its own (stuck for good once that chain's epoch
# passes this one's): TestSimMoves seed 81 (its settle check).
mutant settle-takes-foreign-refs shared/settle/settle.go "./shared/server -run ^TestReview3RefsSettleAfterMoveBack\$" \
  's/ \|\| !inChain\(r, set.Star\) \{/ {/'
mutant kafka-producer-flood-clears-all shared/kafka/produce.go "./shared/kafka -run ^TestReview3ProducerStatesPerPrincipal\$" \
  's/\t\tps.dropLargest\(\)\n/\t\tclear(ps.next)\n\t\tps.total = 0\n/' \
  "the simulation runs no Kafka front end"
mutant move-finish-trusts-memory shared/server/move.go "./shared/server -run ^TestReview3ZombieSealNeverMovesAgain\$" \
  's/if got, ok := star.Sealed\(last.Commands\); !ok \|\| got != to \{/if got, ok := star.Sealed(last.Commands); false \&\& (!ok || got != to) {/' \
  "the simulation's old star never outlives its successor with the stream moved back"
mutant unfinished-move-waits shared/server/move.go "./shared/server -run ^TestReview3SealedMoveFinishesItself\$" \
  's/\ts.unfinished\[id\] = to /\t_ = to /' \
  "the simulation's mover retries an interrupted move itself"

# Issue 36 (ADR 0069): an append session's send loop that holds an ack's
# flush while the next queued ack is still to come (the client waits for
# an ack written but not sent), or never holds one (a write per ack). The
# simulation runs the star, not the API server's send loop.
mutant server-holds-ack-for-one-to-come shared/server/flush.go "./shared/server -run ^TestSendAcks" \
  's/hold\(next != nil && next.ready\(\)\)/hold(next != nil)/' "the send loop is the API server's; the simulation drives the star"
mutant server-flushes-every-ack shared/server/flush.go "./shared/server -run ^TestSendAcks|^TestAppendSessionCoalesces" \
  's/hold\(next != nil && next.ready\(\)\)/hold(false)/' "the send loop is the API server's; the simulation drives the star"
want=("$@")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The tree as it is (committed or not), without the CDK module.
git ls-files -co --exclude-standard | grep -v '^infra/' | tar -cf - -T - | tar -xf - -C "$tmp"
echo "mutants: tree copied to $tmp (timeout ${timeout_s}s per run)"

# run DIR LABEL PKGS...: 0 when the tests fail by an assertion; 1 when they
# pass; 2 when they fail only by timing out.
run() {
  local label=$1; shift
  local log="$tmp/.log"
  (cd "$tmp" && go test -count=1 -timeout "${timeout_s}s" "$@" >"$log" 2>&1)
  local rc=$?
  if [ $rc -eq 0 ]; then echo "    $label: PASSED (mutant survives)"; return 1; fi
  # Caught means a test failed an assertion (go test prints "--- FAIL"); a
  # build failure or a hang (go test's timeout panics without one) is not.
  if ! grep -qE '^\s*--- FAIL: ' "$log"; then
    if grep -q 'panic: test timed out' "$log"; then
      echo "    $label: only timed out (mutant survives)"; return 2
    fi
    echo "    $label: failed without a failing test (build error?): $(grep -m1 -vE '^(ok|FAIL|\?)\s' "$log" | cut -c1-200)"; return 1
  fi
  local first seeds
  # The simulation's failure names its step; elsewhere the first file:line
  # after the first failing test.
  first=$(grep -m1 -E 'seed=[0-9]+ step=[0-9]+ action=' "$log" || awk '/--- FAIL: /{on=1} on && /\.go:[0-9]+: / && !/replay: go test/ {print; exit}' "$log")
  first=$(echo "$first" | sed 's/^\s*//' | cut -c1-220)
  seeds=$(grep -oE 'failed_seeds=[0-9]+' "$log" | head -1)
  echo "    $label: caught${seeds:+ ($seeds)}: $first"
  return 0
}

caught=0 survived=0 stale=0 names=()
for mi in "${!names_all[@]}"; do
  name=${names_all[$mi]} file=${files[$mi]} pkgs=${pkgs_all[$mi]} expr=${exprs[$mi]} nosim=${nosims[$mi]}
  if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " == *" $name "* ]]; then continue; fi
  names+=("$name")
  echo "== mutant $name ($file)"
  cp "$tmp/$file" "$tmp/.orig"
  perl -0pi -e "$expr" "$tmp/$file"
  if cmp -s "$tmp/$file" "$tmp/.orig"; then
    echo "    STALE: the change no longer applies to $file; update its pattern"
    stale=$((stale+1))
    continue
  fi
  if [ -n "${MUTANT_DRY:-}" ]; then
    # Dry run: the mutant applies and builds (with its tests).
    if (cd "$tmp" && go vet "./$(dirname "$file")" >"$tmp/.log" 2>&1); then echo "    applies and builds"; caught=$((caught+1))
    else echo "    does not build:"; head -5 "$tmp/.log"; survived=$((survived+1)); fi
    cp "$tmp/.orig" "$tmp/$file"
    continue
  fi
  ok=1
  if [ -n "$nosim" ]; then
    echo "    simulation: not run ($nosim)"
  else
    run "simulation (default budget)" ./tests/sim || ok=0
  fi
  # shellcheck disable=SC2086
  run "package tests ($pkgs)" $pkgs || ok=0
  cp "$tmp/.orig" "$tmp/$file"
  if [ $ok -eq 1 ]; then caught=$((caught+1)); else survived=$((survived+1)); fi
done
echo "SUMMARY mutants: mutants=${#names[@]} caught=$caught survived=$survived stale=$stale"
[ $survived -eq 0 ] && [ $stale -eq 0 ] && [ ${#names[@]} -gt 0 ]
