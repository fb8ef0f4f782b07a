package trim_test

import (
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/trim"
)

// TestKeepForeverNeverDeletes (issue 30, finding 1): a stream's retention
// set to 1 h, then to 0 (keep forever), with the pass index. Its refs
// carry the 1 h (their flushes happened under it); its newest command
// state, 0, is in the window's runs only (or, in "unabsorbed", only in
// the stream's metadata: the reconfigure was acknowledged, its flight not
// yet absorbed). Two hours later every ref but the last is older than
// 1 h, yet trim must delete nothing: the stream keeps its records
// forever. Before the fix trim read the 1 h from the metastore's last
// ref and dropped 3 of the 4 refs (both subtests failed).
func TestKeepForeverNeverDeletes(t *testing.T) {
	for _, absorbed := range []bool{true, false} {
		name := map[bool]string{true: "absorbed", false: "unabsorbed"}[absorbed]
		t.Run(name, func(t *testing.T) { testKeepForever(t, absorbed) })
	}
}

func testKeepForever(t *testing.T, absorbed bool) {
	const hour = int64(time.Hour / time.Millisecond)
	oneHour := format.StreamCommands{HasConfig: true, Config: format.StreamConfig{RetentionMs: hour}}
	e, refs := fourFlushedRefs(t, oneHour, hour)
	if c := refs[3].Commands; c == nil || c.Config.RetentionMs != hour {
		t.Fatalf("last ref's command state %+v, want the 1 h", c)
	}
	id := e.ids[0]
	// Keep forever: the command rides the next flight, which stays in the
	// window (settled into a run, not flushed), or is not absorbed yet.
	e.setCommands(format.StreamCommands{HasConfig: true}, 0)
	e.s.FlushBytes = 0 // the defaults: 4 MiB or an hour
	e.flight([]int{1}, 0)
	if absorbed {
		e.settleAll()
		if h := e.head(); h.Flushed == h.Settled {
			t.Fatalf("head %+v: the last run was flushed", h)
		}
	}
	e.clk.Set(time.UnixMilli(e.ts + 2*hour))
	res, after := streamsThenRefs(t, e.tr, e.mem, id.String())
	if res.RefsDropped != 0 || res.Objects != 0 || len(after) != 4 {
		t.Fatalf("retention 0 (keep forever): trim dropped %d refs and %d objects, %d of 4 refs left", res.RefsDropped, res.Objects, len(after))
	}
	checkPrefix(t, e) // refs, then the window: every record still reads
}

// TestWindowCommandsApply: the stream's newest command state in the
// window (a retention shortened from forever to 1 h, or a trim point)
// applies although its refs still carry the old state: trim reads the
// current state, not the last ref's (the mutant "trim reads the last
// ref's config" keeps everything here).
func TestWindowCommandsApply(t *testing.T) {
	const hour = int64(time.Hour / time.Millisecond)
	for _, tc := range []struct {
		name string
		cmds func(refs []metastore.Ref) format.StreamCommands
		meta int64 // the metadata's retention after the command
	}{
		{"retention", func([]metastore.Ref) format.StreamCommands {
			return format.StreamCommands{HasConfig: true, Config: format.StreamConfig{RetentionMs: hour}}
		}, hour},
		{"trim-point", func(refs []metastore.Ref) format.StreamCommands {
			return format.StreamCommands{HasConfig: true, TrimSeq: refs[2].FirstSeq}
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, refs := fourFlushedRefs(t, format.StreamCommands{HasConfig: true}, 0) // keep forever
			id := e.ids[0]
			e.setCommands(tc.cmds(refs), tc.meta)
			e.s.FlushBytes = 0
			e.flight([]int{1}, 0)
			e.settleAll()
			if h := e.head(); h.Flushed == h.Settled {
				t.Fatalf("head %+v: the last run was flushed", h)
			}
			e.clk.Set(time.UnixMilli(e.ts + 2*hour))
			res, after := streamsThenRefs(t, e.tr, e.mem, id.String())
			// Retention: the three refs older than 1 h go, never the last.
			// Trim point: the two below it.
			want := map[string]int{"retention": 3, "trim-point": 2}[tc.name]
			if res.RefsDropped != want || len(after) != 4-want || after[0].FirstSeq != refs[want].FirstSeq {
				t.Fatalf("trim dropped %d refs (%d left), want %d", res.RefsDropped, len(after), want)
			}
		})
	}
}

// fourFlushedRefs is an env of one stream on the pass index whose first
// 8 records settle into four refs, one per round half an hour apart, each
// carrying command state cmds (the stream's metadata retention metaMs).
func fourFlushedRefs(t *testing.T, cmds format.StreamCommands, metaMs int64) (*env, []metastore.Ref) {
	t.Helper()
	const hour = int64(time.Hour / time.Millisecond)
	e := newEnv(t, 1, 0)
	e.a.Index, e.s.PassIndex, e.tr.PassIndex = e.settled, true, true
	e.s.MergeBelowBytes = -1 // one settled object per flush
	e.s.FlushBytes = 1       // every step flushes what it settles
	e.setCommands(cmds, metaMs)
	for range 4 {
		e.flights(2)
		e.settleAll() // every run flushed at once: a ref per round, with cmds
		e.ts += hour / 2
	}
	refs, err := e.mem.QueryRefs(t.Context(), e.ids[0].String(), 0, 100)
	if err != nil || len(refs) != 4 {
		t.Fatalf("%d refs (%v), want 4", len(refs), err)
	}
	return e, refs
}

// setCommands makes stream 0's next flights carry command state c and
// records retention ms in its metadata, as ReconfigureStream does.
func (e *env) setCommands(c format.StreamCommands, ms int64) {
	e.t.Helper()
	e.star.Commands = map[format.StreamID]*format.StreamCommands{e.ids[0]: &c}
	if err := e.mem.SetStreamConfig(e.t.Context(), e.names[0], e.ids[0].String(), ms, metastore.Timestamping{}); err != nil {
		e.t.Fatal(err)
	}
}

// TestRetentionRule pins Retention: the command's retention, never
// shorter than the metadata's (0 is forever, on either side).
func TestRetentionRule(t *testing.T) {
	cfg := func(ms int64) format.StreamCommands {
		return format.StreamCommands{HasConfig: true, Config: format.StreamConfig{RetentionMs: ms}}
	}
	for _, tc := range []struct {
		meta int64
		cmds format.StreamCommands
		want int64
	}{
		{0, format.StreamCommands{}, 0},
		{5, format.StreamCommands{}, 5},
		{5, format.StreamCommands{TrimSeq: 9}, 5}, // no config command: the metadata's
		{0, cfg(5), 0},                            // metadata forever: forever
		{5, cfg(0), 0},                            // command forever: forever
		{5, cfg(4), 5},                            // the longer
		{5, cfg(5), 5},
		{5, cfg(6), 6},
	} {
		if got := trim.Retention(metastore.Stream{RetentionMs: tc.meta}, tc.cmds); got != tc.want {
			t.Errorf("Retention(metadata %d, %+v) = %d, want %d", tc.meta, tc.cmds, got, tc.want)
		}
	}
}

// TestRetentionOnTime (issue 30): a slow stream (one small record every
// 10 minutes for 8 hours) with a 1 h retention, on the pass index with
// settle's defaults (FlushAge 1 h, objects merged while small). After
// trim, no record older than retention + FlushAge (+ one 10-minute step)
// is left in any ref, and none past its retention is in a ref but the
// stream's last: records are gone from storage within about an hour of
// expiring. Before (a 24 h FlushAge, and merging a small object whatever
// its age) the stream's every record stayed in one growing object, its
// last ref, which retention never drops: trim deleted nothing.
func TestRetentionOnTime(t *testing.T) {
	const minute = int64(time.Minute / time.Millisecond)
	e := newEnv(t, 1, 60*minute)
	e.a.Index, e.s.PassIndex, e.tr.PassIndex = e.settled, true, true
	start := e.ts
	for i := range 48 {
		e.ts = start + int64(i)*10*minute
		e.flight([]int{1}, 0)
		e.settleAll()
	}
	now := e.ts
	e.trimAll()
	e.clk.Set(time.UnixMilli(now))
	if _, err := e.tr.Streams(t.Context()); err != nil {
		t.Fatal(err)
	}
	refs, err := e.mem.QueryRefs(t.Context(), e.ids[0].String(), 0, 1000)
	if err != nil || len(refs) == 0 {
		t.Fatalf("refs %d (%v)", len(refs), err)
	}
	for i, r := range refs {
		if r.FirstTsMs < now-60*minute-60*minute-10*minute {
			t.Fatalf("ref %d of %d holds a record %d minutes old (retention 60, flush age 60): seqs %d-%d", i, len(refs), (now-r.FirstTsMs)/minute, r.FirstSeq, r.LastSeq)
		}
		if i < len(refs)-1 && r.LastTsMs < now-60*minute {
			t.Fatalf("ref %d of %d (not the last) is past its retention: last record %d minutes old", i, len(refs), (now-r.LastTsMs)/minute)
		}
	}
}
