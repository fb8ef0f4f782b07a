package settle

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/objstore"
)

// TestPutCommandIndex: settle writes a run's command index (design 014,
// "The command index") beside a version 2 run whose command table is
// larger than cmdxMinTable, the bytes format.AppendCommandIndex gives;
// none beside a version 1 run or a small table; and leaves one already
// there (a copy's of another plan) as it is.
func TestPutCommandIndex(t *testing.T) {
	run := func(streams int, commands bool) []byte {
		p := format.PassIndex{Epoch: 1, FirstSlot: 0, EndSlot: 1}
		for i, id := range randomStreamIDs(rand.New(rand.NewPCG(uint64(streams), 1)), streams) {
			e := format.PassStream{Stream: id, FirstSeq: 0, LastSeq: 0, Bytes: 10, Segments: []format.PassSegment{{Slot: 0, FirstSeq: 0, Count: 1, Length: 10}}}
			if commands {
				e.Commands = &format.StreamCommands{FenceToken: fmt.Sprintf("token-%030d", i)}
			}
			p.Streams = append(p.Streams, e)
		}
		obj, err := format.AppendPassIndex(nil, p)
		if err != nil {
			t.Fatal(err)
		}
		return obj
	}
	big, small, v1 := run(5000, true), run(10, true), run(5000, false)
	bucket := objstore.NewMem("settled")
	s := &Settler{Settled: bucket}
	for _, tc := range []struct {
		key   string
		obj   []byte
		index bool
	}{{"big", big, true}, {"small", small, false}, {"v1", v1, false}} {
		if err := s.putCommandIndex(t.Context(), tc.key, tc.obj); err != nil {
			t.Fatal(err)
		}
		got, err := bucket.Get(t.Context(), format.CommandIndexKey(tc.key), 0, -1)
		switch {
		case !tc.index && err == nil:
			t.Fatalf("%s: a command index written", tc.key)
		case tc.index && err != nil:
			t.Fatalf("%s: %v", tc.key, err)
		case tc.index:
			want, _ := format.AppendCommandIndex(nil, tc.obj)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: command index of %d bytes, not AppendCommandIndex's %d", tc.key, len(got), len(want))
			}
		}
	}
	defer SetCommandIndexMin(-1)()
	if err := s.putCommandIndex(t.Context(), "small", small); err != nil {
		t.Fatal(err)
	}
	if _, err := bucket.Get(t.Context(), format.CommandIndexKey("small"), 0, -1); err != nil {
		t.Fatalf("small table, no minimum: %v", err)
	}
	// Another plan's index at the key: left as it is, no error.
	if err := s.putCommandIndex(t.Context(), "big", run(4000, true)); err != nil {
		t.Fatal(err)
	}
	got, _ := bucket.Get(t.Context(), format.CommandIndexKey("big"), 0, -1)
	if want, _ := format.AppendCommandIndex(nil, big); !bytes.Equal(got, want) {
		t.Fatal("the index already there was replaced")
	}
}
