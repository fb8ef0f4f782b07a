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
