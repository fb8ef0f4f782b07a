package format

import (
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// CRCCombine is the CRC of the concatenation, for every split of random
// bytes (lengths 0 to past 64 KiB) and against the naive reference: the
// CRC over the concatenated bytes.
func TestCRCCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 2))
	for _, n := range []int{0, 1, 2, 3, 7, 8, 31, 32, 33, 4095, 65536, 65537, 300_001} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		want := CRC(b)
		for range 8 {
			cut := 0
			if n > 0 {
				cut = rng.IntN(n + 1)
			}
			if got := CRCCombine(CRC(b[:cut]), CRC(b[cut:]), n-cut); got != want {
				t.Fatalf("%d bytes split at %d: combined %08x, CRC %08x", n, cut, got, want)
			}
		}
	}
	// A different second part gives a different combination (the check
	// above cannot pass on a constant).
	if CRCCombine(CRC([]byte("ab")), CRC([]byte("c")), 1) == CRCCombine(CRC([]byte("ab")), CRC([]byte("d")), 1) {
		t.Fatal("combination ignores the second CRC")
	}
}

func FuzzCRCCombine(f *testing.F) {
	f.Add([]byte("settled"), []byte("records"))
	f.Add([]byte{}, []byte{0})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		if got, want := CRCCombine(CRC(a), CRC(b), len(b)), crc32.Update(CRC(a), castagnoli, b); got != want {
			t.Fatalf("%d+%d bytes: combined %08x, CRC %08x", len(a), len(b), got, want)
		}
	})
}

// A settled object built from records larger than Add's piece
// (settledChunk), added in random groups, into a dirty reused buffer, is
// byte for byte AppendSettled's (a copy then a CRC over the whole
// segment), and parses.
func TestSettledBuilderChunkedMatchesAppendSettled(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 3))
	var recs []Record
	var encs [][]byte
	for i := range 200 {
		body := make([]byte, rng.IntN(3*settledChunk/2))
		for j := range body {
			body[j] = byte(rng.Uint32())
		}
		r := Record{TimestampMs: 1700000000000 + int64(i), Body: body}
		recs = append(recs, r)
		encs = append(encs, enc(r))
	}
	want, err := AppendSettled(nil, SettledHeader{Stream: sid(0x36), FirstSeq: 9, LastSeq: 9 + uint64(len(recs)) - 1,
		FirstTsMs: recs[0].TimestampMs, LastTsMs: recs[len(recs)-1].TimestampMs}, encs...)
	if err != nil {
		t.Fatal(err)
	}
	dirty := bytes.Repeat([]byte{0x5a}, len(want))
	b := NewSettledBuilderIn(dirty, sid(0x36), 9, len(want))
	for i := 0; i < len(recs); {
		n := 1 + rng.IntN(min(5, len(recs)-i))
		if err := b.Add(bytes.Join(encs[i:i+n], nil), n, recs[i].TimestampMs, recs[i+n-1].TimestampMs); err != nil {
			t.Fatal(err)
		}
		i += n
	}
	got, _, err := b.Finish()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("builder: %v; %d bytes, equal to AppendSettled's %d: %v", err, len(got), len(want), bytes.Equal(got, want))
	}
	if _, back, err := ParseSettled(got); err != nil || len(back) != len(recs) || !bytes.Equal(back[len(back)-1].Body, recs[len(recs)-1].Body) {
		t.Fatalf("parse: %v, %d records", err, len(back))
	}
}
