package metastore

import (
	"errors"
	"slices"
	"testing"
)

func FuzzDecodeProducerMarks(f *testing.F) {
	f.Add(EncodeProducerMarks([]ProducerMark{{Producer: [16]byte{1}, BatchSeq: 2, FirstSeq: 3, LastSeq: 4}}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := DecodeProducerMarks(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		if got := EncodeProducerMarks(ms); !slices.Equal(got, b) && len(b) > 0 {
			t.Fatalf("marks re-encode differently")
		}
	})
}

func TestTrimMarks(t *testing.T) {
	var in []ProducerMark
	a, b := [16]byte{1}, [16]byte{2}
	for i := range 20 {
		in = append(in, ProducerMark{Producer: a, BatchSeq: uint64(i), FirstSeq: uint64(2 * i), LastSeq: uint64(2 * i)})
		in = append(in, ProducerMark{Producer: b, BatchSeq: uint64(i), FirstSeq: uint64(2*i + 1), LastSeq: uint64(2*i + 1)})
	}
	out := TrimMarks(in)
	if len(out) != 2*MaxMarksPerProducer {
		t.Fatalf("%d marks kept", len(out))
	}
	if !slices.Equal(out, in[len(in)-2*MaxMarksPerProducer:]) {
		t.Fatalf("kept %+v, want each producer's latest in seq order", out)
	}
	var many []ProducerMark
	for i := range MaxRefProducerMarks + 10 {
		many = append(many, ProducerMark{Producer: [16]byte{byte(i), byte(i >> 8), 1}, FirstSeq: uint64(i), LastSeq: uint64(i)})
	}
	if got := TrimMarks(many); len(got) != MaxRefProducerMarks || got[0].FirstSeq != 10 {
		t.Fatalf("kept %d from seq %d", len(got), got[0].FirstSeq)
	}
}

// UnionMarks keeps each (producer, batch seq) once, in seq order, with
// the seqs of the latest list naming it.
func TestUnionMarks(t *testing.T) {
	p := func(b byte) [16]byte { return [16]byte{b} }
	own := []ProducerMark{{Producer: p(1), BatchSeq: 4, FirstSeq: 40, LastSeq: 49}, {Producer: p(2), BatchSeq: 0, FirstSeq: 50, LastSeq: 59}}
	carried := []ProducerMark{{Producer: p(3), BatchSeq: 7, FirstSeq: 5, LastSeq: 9}, {Producer: p(1), BatchSeq: 4, FirstSeq: 40, LastSeq: 49}}
	later := []ProducerMark{{Producer: p(2), BatchSeq: 0, FirstSeq: 50, LastSeq: 59}, {Producer: p(2), BatchSeq: 1, FirstSeq: 60, LastSeq: 60}}
	got := UnionMarks(own, carried, later)
	want := []ProducerMark{carried[0], own[0], own[1], later[1]}
	if !slices.Equal(got, want) {
		t.Fatalf("union %+v, want %+v", got, want)
	}
	if UnionMarks(nil, nil) != nil {
		t.Fatal("the union of nothing is not nil")
	}
}
