package sim

import (
	"strings"
	"testing"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/star"
)

// TestCountRecords: the figures are counted, not assumed: a record changed,
// missing or repeated shows in them, and a failed run is named.
func TestCountRecords(t *testing.T) {
	rec := func(seq uint64, body string) star.SeqRecord {
		return star.SeqRecord{Seq: seq, Record: format.Record{Body: []byte(body)}}
	}
	acked := map[uint64]string{0: "a", 1: "b", 2: "c", 3: "d"}
	got := CountRecords(acked, []star.SeqRecord{rec(0, "a"), rec(1, "x"), rec(2, "c"), rec(3, "c")})
	want := Tally{Acked: 4, ReadBack: 2, Lost: 2, Duplicated: 1}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got := CountRecords(acked, nil); got != (Tally{Acked: 4, Lost: 4}) {
		t.Fatalf("nothing read back: %+v", got)
	}
	var tt Totals
	tt.Kind = "seeds"
	tt.Add("1", want, false)
	tt.Add("7", Tally{Acked: 1, ReadBack: 1}, true)
	if s, w := tt.String(), "seeds=2 failed_seeds=1 failed=7 records_acked=5 records_read_back=3 records_lost=2 records_duplicated=1"; !strings.Contains(s, w) {
		t.Fatalf("totals %q, want %q", s, w)
	}
}
