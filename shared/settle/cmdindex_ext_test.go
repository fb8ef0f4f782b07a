package settle_test

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/passindex"
	"github.com/strandlog/strand/shared/settle"
)

// TestSettleWritesCommandIndex: settle steps over flights with command
// state on every stream write, beside each run and merged run, its
// command index (design 014, "The command index"; the minimum table size
// lowered so that a small run gets one), the bytes format.AppendCommandIndex
// gives of the run; a window whose budget holds no run reads every
// stream's parts through them, with the state an unbounded window reads.
func TestSettleWritesCommandIndex(t *testing.T) {
	defer settle.SetCommandIndexMin(-1)()
	e := newEnv(t, 5, nil)
	e.withIndex()
	e.s.MaxSlotsPerStep = 2
	e.s.Fanout = 2
	e.star.Commands = map[format.StreamID]*format.StreamCommands{}
	for i, id := range e.ids {
		e.star.Commands[id] = &format.StreamCommands{FenceToken: fmt.Sprintf("token-%d", i), TrimSeq: uint64(i)}
	}
	for range 3 {
		e.flights(4)
		e.absorbAll()
		e.step()
		e.step()
	}
	runs := append(e.runKeys(), e.listed("index/"+chainX.Star+"/express/merged/")...)
	var indexed, merged int
	for _, k := range runs {
		if strings.HasSuffix(k, ".cmdx") {
			continue
		}
		obj, err := e.settled.Get(t.Context(), k, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		cmdx, err := e.settled.Get(t.Context(), format.CommandIndexKey(k), 0, -1)
		if err != nil {
			t.Fatalf("run %s: no command index: %v", k, err)
		}
		want, err := format.AppendCommandIndex(nil, obj)
		if err != nil || !bytes.Equal(cmdx, want) {
			t.Fatalf("run %s: command index is not AppendCommandIndex's (%v)", k, err)
		}
		indexed++
		if strings.Contains(k, "/merged/") {
			merged++
		}
	}
	if indexed < 3 || merged == 0 {
		t.Fatalf("%d runs with a command index, %d merged: %v", indexed, merged, runs)
	}
	h := e.head()
	ref := &passindex.Window{Meta: e.mem, Bucket: e.settled, MaxBytes: -1}
	w := &passindex.Window{Meta: e.mem, Bucket: e.settled, MaxBytes: 1, CommandIndexGetBytes: -1}
	for i, id := range e.ids {
		want, err := ref.HeadRefs(t.Context(), chainX, h, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := w.HeadRefs(t.Context(), chainX, h, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("stream %d: parts by range %+v, want %+v", i, got, want)
		}
		for _, r := range got {
			if r.Commands == nil || r.Commands.FenceToken != fmt.Sprintf("token-%d", i) {
				t.Fatalf("stream %d: part %+v without its command state", i, r)
			}
		}
		if len(got) == 0 {
			t.Fatalf("stream %d: no part in the window %+v", i, h)
		}
	}
	if st := w.Stats(); st.CommandIndexed == 0 || st.CommandIndexRefused != 0 {
		t.Fatalf("window stats %+v: want lookups through the command indexes, none refused", st)
	}
}
