package format

import "testing"

// TestCarriedEntrySizeIsTheEncoding: CarriedEntrySize, which the star
// counts toward a flight's size (ADR 0062), is the bytes an entry takes in
// the encoded carried table, apart from the table's 4-byte count.
func TestCarriedEntrySizeIsTheEncoding(t *testing.T) {
	for _, n := range []int{1, 8, MaxCarriedMarks} {
		marks := make([]PassMark, n)
		for i := range marks {
			marks[i] = PassMark{BatchSeq: uint64(i), FirstSeq: uint64(i), LastSeq: uint64(i)}
		}
		one := appendCarriedTable(nil, []CarriedEntry{{Marks: marks, Below: uint64(n)}})
		if got := len(one) - 4; got != CarriedEntrySize(n) {
			t.Fatalf("%d marks: an entry encodes in %d bytes, CarriedEntrySize says %d", n, got, CarriedEntrySize(n))
		}
	}
	if got := CarriedEntrySize(MaxCarriedMarks); got != 40976 {
		t.Fatalf("a full table is %d bytes, the documented bound is 40,976", got)
	}
}
