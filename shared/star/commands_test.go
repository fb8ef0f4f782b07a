package star

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

func strp(s string) *string { return &s }

// TestFenceRefusesOtherTokens: once fenced, an append must carry the
// current token (no token, or another, is refused and writes nothing); a
// fence with a wrong expected token is refused; unfencing restores
// token-less appends. The command records are on the chain, and each
// flight's command table carries the state after its segment.
func TestFenceRefusesOtherTokens(t *testing.T) {
	h := newHarness(t, metastore.Standard, 1, 1)
	h.start()
	id := h.open(metastore.Standard, 1)[0]
	ctx := context.Background()
	one := func(b string) []format.Record { return []format.Record{{Body: []byte(b)}} }
	if _, err := h.star.Append(ctx, id, one("r0"), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.star.Append(ctx, id, one("x"), AppendOptions{FenceToken: "w1"}); !errors.Is(err, ErrFenced) || !strings.Contains(err.Error(), "not fenced") {
		t.Fatalf("a token on an unfenced stream: %v", err)
	}
	fa, err := h.star.Fence(ctx, id, "w1", nil, nil)
	if err != nil || fa.FirstSeq != 1 || fa.LastSeq != 1 {
		t.Fatalf("fence: %+v %v", fa, err)
	}
	if c, _ := h.star.Commands(id); c.FenceToken != "w1" {
		t.Fatalf("acknowledged state %+v", c)
	}
	for _, tok := range []string{"", "w2", "w1 "} {
		_, err := h.star.Append(ctx, id, one("deposed"), AppendOptions{FenceToken: tok})
		if !errors.Is(err, ErrFenced) || strings.Contains(err.Error(), `"w1"`) {
			t.Fatalf("append with token %q: %v (must be refused without revealing the token)", tok, err)
		}
	}
	if a, err := h.star.Append(ctx, id, one("r2"), AppendOptions{FenceToken: "w1"}); err != nil || a.FirstSeq != 2 {
		t.Fatalf("append with the token: %+v %v", a, err)
	}
	if _, err := h.star.Fence(ctx, id, "w2", strp("w0"), nil); !errors.Is(err, ErrFenced) {
		t.Fatalf("fence expecting the wrong token: %v", err)
	}
	if _, err := h.star.Fence(ctx, id, strings.Repeat("t", format.MaxFenceTokenBytes+1), nil, nil); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("token over the bound: %v", err)
	}
	if _, err := h.star.Fence(ctx, id, "", strp("w1"), nil); err != nil {
		t.Fatalf("unfence: %v", err)
	}
	if a, err := h.star.Append(ctx, id, one("r4"), AppendOptions{}); err != nil || a.FirstSeq != 4 {
		t.Fatalf("append after unfencing: %+v %v", a, err)
	}
	if next, _, _ := h.star.Tail(id); next != 5 {
		t.Fatalf("tail %d: a refused append was written", next)
	}
	// The chain: r0, fence w1, r2, fence "", r4; command tables follow.
	var bodies []string
	var tables []format.StreamCommands
	h.eachRecord(func(f format.Flight, r format.Record) {
		if r.Headers == nil && r.Body == nil { // the flight
			for _, c := range f.Commands {
				tables = append(tables, c.Commands)
			}
			if f.Envelope.Slot == 0 && f.Envelope.Version != 0 {
				t.Fatalf("a flight before any command is version %d, want 1", f.Envelope.Version)
			}
			return
		}
		bodies = append(bodies, format.CommandOf(r)+":"+string(r.Body))
	})
	if want := []string{":r0", "fence:w1", ":r2", "fence:", ":r4"}; strings.Join(bodies, ",") != strings.Join(want, ",") {
		t.Fatalf("chain %q, want %q", bodies, want)
	}
	if len(tables) != 4 || tables[0].FenceToken != "w1" || tables[1].FenceToken != "w1" || tables[2].FenceToken != "" || tables[3] != (format.StreamCommands{}) {
		t.Fatalf("command tables %+v", tables)
	}
}

// TestFenceSequencedWithAppends: a writer appends without pause under
// token a while another fences the stream to b. On the chain, every record
// after the fence record is b's: the deposed writer never slipped a batch
// in after the fence, and every batch a was acked for is before it.
func TestFenceSequencedWithAppends(t *testing.T) {
	h := newHarness(t, metastore.Express, 3, 2)
	h.start()
	id := h.open(metastore.Express, 1)[0]
	ctx := context.Background()
	if _, err := h.star.Fence(ctx, id, "a", nil, nil); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ackedA []uint64
	stop := make(chan struct{})
	for p := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				a, err := h.star.Append(ctx, id, []format.Record{{Body: fmt.Appendf(nil, "a%d-%d", p, i)}}, AppendOptions{FenceToken: "a"})
				if errors.Is(err, ErrFenced) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				ackedA = append(ackedA, a.FirstSeq)
				mu.Unlock()
			}
		}()
	}
	waitFor(t, "writer a to append", func() bool { mu.Lock(); defer mu.Unlock(); return len(ackedA) > 50 })
	fb, err := h.star.Fence(ctx, id, "b", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := h.star.Append(ctx, id, []format.Record{{Body: fmt.Appendf(nil, "b-%d", i)}}, AppendOptions{FenceToken: "b"}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	for _, s := range ackedA {
		if s >= fb.FirstSeq {
			t.Fatalf("writer a acked at seq %d, after the fence at %d", s, fb.FirstSeq)
		}
	}
	recs := h.chainRecords("star-0", 1)[id]
	if uint64(len(recs)) != fb.FirstSeq+21 {
		t.Fatalf("chain holds %d records, want %d", len(recs), fb.FirstSeq+21)
	}
	for seq, b := range recs[fb.FirstSeq+1:] {
		if !strings.HasPrefix(b, "b-") {
			t.Fatalf("record %q at seq %d, after the fence", b, int(fb.FirstSeq)+1+seq)
		}
	}
}

// TestFenceSurvivesHaltRecovery: the slots after the fence are poisoned
// (a halt and an in-process recovery); the fence holds through it, and the
// republished flights still carry the command state.
func TestFenceSurvivesHaltRecovery(t *testing.T) {
	h := newHarness(t, metastore.Express, 3, 2, withChainFencer)
	var foreign format.Nonce
	copy(foreign[:], "someone-else-16b")
	for _, m := range h.mems[:2] {
		if err := m.PutIfAbsent(context.Background(), format.SlotKey("star-0", 1, 1), format.Poison(1, 1, foreign).Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	h.start()
	id := h.open(metastore.Express, 1)[0]
	ctx := context.Background()
	if _, err := h.star.Fence(ctx, id, "w1", nil, nil); err != nil { // slot 0
		t.Fatal(err)
	}
	if _, err := h.star.Append(ctx, id, recs(1, nil2), AppendOptions{FenceToken: "w1"}); err != nil { // slot 1: halts, recovers
		t.Fatal(err)
	}
	if h.star.loglets[metastore.Express].m.halts.Value() == 0 {
		t.Fatal("no halt")
	}
	if _, err := h.star.Append(ctx, id, recs(1, nil2), AppendOptions{}); !errors.Is(err, ErrFenced) {
		t.Fatalf("token-less append after the recovery: %v", err)
	}
	obj, err := h.mems[2].Get(ctx, format.SlotKey("star-0", 2, 0), 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	f, err := format.ParseFlight(obj)
	if err != nil || len(f.Commands) != 1 || f.Commands[0].Commands.FenceToken != "w1" {
		t.Fatalf("republished flight: %+v %v", f.Commands, err)
	}
}

// TestOpenSeedsCommands: a stream opened with recovered command state (a
// successor after takeover) enforces its fence and reports its trim point,
// and its first flight carries the state on.
func TestOpenSeedsCommands(t *testing.T) {
	h := newHarness(t, metastore.Standard, 1, 1)
	h.start()
	id := sid(0)
	if err := h.star.Open(StreamInfo{ID: id, Class: metastore.Standard, Next: 10, Commands: &format.StreamCommands{FenceToken: "w", TrimSeq: 4}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := h.star.Append(ctx, id, recs(1, nil2), AppendOptions{}); !errors.Is(err, ErrFenced) {
		t.Fatalf("token-less append: %v", err)
	}
	if c, _ := h.star.Commands(id); c.TrimSeq != 4 || c.FenceToken != "w" {
		t.Fatalf("state %+v", c)
	}
	if _, err := h.star.Append(ctx, id, recs(1, nil2), AppendOptions{FenceToken: "w"}); err != nil {
		t.Fatal(err)
	}
	obj, _ := h.mems[0].Get(ctx, format.SlotKey("star-0", 1, 0), 0, -1)
	if f, err := format.ParseFlight(obj); err != nil || len(f.Commands) != 1 || f.Commands[0].Commands != (format.StreamCommands{FenceToken: "w", TrimSeq: 4}) {
		t.Fatalf("first flight after the open: %+v %v", f.Commands, err)
	}
}

// TestTrimCommand: trim takes a seq, moves the acknowledged trim point,
// never backward, caps at its own seq, and obeys the fence.
func TestTrimCommand(t *testing.T) {
	h := newHarness(t, metastore.Standard, 1, 1)
	h.start()
	id := h.open(metastore.Standard, 1)[0]
	ctx := context.Background()
	if _, err := h.star.Append(ctx, id, recs(5, nil2), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	a, point, err := h.star.Trim(ctx, id, 3, AppendOptions{})
	if err != nil || a.FirstSeq != 5 || point != 3 {
		t.Fatalf("trim: %+v point %d %v", a, point, err)
	}
	if c, _ := h.star.Commands(id); c.TrimSeq != 3 {
		t.Fatalf("trim point %d, want 3", c.TrimSeq)
	}
	if _, _, err := h.star.Trim(ctx, id, 1, AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if c, _ := h.star.Commands(id); c.TrimSeq != 3 {
		t.Fatalf("trim moved backward to %d", c.TrimSeq)
	}
	a, point, err = h.star.Trim(ctx, id, 1000, AppendOptions{})
	if c, _ := h.star.Commands(id); err != nil || c.TrimSeq != a.FirstSeq || point != a.FirstSeq {
		t.Fatalf("trim past the tail: point %d, the command at %d (%v)", c.TrimSeq, a.FirstSeq, err)
	}
	if _, err := h.star.Fence(ctx, id, "w", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.star.Trim(ctx, id, 9, AppendOptions{}); !errors.Is(err, ErrFenced) {
		t.Fatalf("trim without the token: %v", err)
	}
	obj, _ := h.mems[0].Get(ctx, format.SlotKey("star-0", 1, 1), 0, -1)
	f, _ := format.ParseFlight(obj)
	_, rs, _ := format.DecodeSegment(obj[f.Entries[0].Offset : f.Entries[0].Offset+f.Entries[0].Length])
	if format.CommandOf(rs[0]) != format.CommandTrim || binary.BigEndian.Uint64(rs[0].Body) != 3 {
		t.Fatalf("trim record %+v", rs[0])
	}
}

// eachRecord calls fn with every flight of epoch 1 in bucket 0 (slot
// order) and every record of it, in segment order.
func (h *harness) eachRecord(fn func(f format.Flight, r format.Record)) {
	h.t.Helper()
	for slot := uint64(0); ; slot++ {
		obj, err := h.mems[0].Get(context.Background(), format.SlotKey("star-0", 1, slot), 0, -1)
		if err != nil {
			return
		}
		f, err := format.ParseFlight(obj)
		if err != nil {
			h.t.Fatal(err)
		}
		fn(f, format.Record{}) // the flight itself, before its records
		for _, e := range f.Entries {
			_, rs, err := format.DecodeSegment(obj[e.Offset : e.Offset+e.Length])
			if err != nil {
				h.t.Fatal(err)
			}
			for _, r := range rs {
				fn(f, r)
			}
		}
	}
}
