package sim

import (
	"fmt"
	"strings"
	"sync"

	"github.com/strandlog/strand/shared/star"
)

// Tally is a run's record counts, computed by comparing the independent
// book of acks with what was read back: never typed by hand.
type Tally struct {
	Acked      int64 // records acknowledged to their producers
	ReadBack   int64 // acked records read back at their acked seq, unchanged
	Lost       int64 // acked records not read back at their acked seq
	Duplicated int64 // records read back more than once (extra copies)
}

// CountRecords compares one stream's acked records (body by acked seq)
// with the records read back from it: an acked record counts as read back
// when a record at its seq has its body; a body read more than once counts
// as duplicated (each extra copy once).
func CountRecords(acked map[uint64]string, read []star.SeqRecord) Tally {
	t := Tally{Acked: int64(len(acked))}
	at := make(map[uint64][]byte, len(read))
	seen := make(map[string]bool, len(read))
	for _, r := range read {
		if _, ok := at[r.Seq]; !ok {
			at[r.Seq] = r.Body
		}
		if seen[string(r.Body)] {
			t.Duplicated++
		}
		seen[string(r.Body)] = true
	}
	for seq, body := range acked {
		if b, ok := at[seq]; ok && string(b) == body {
			t.ReadBack++
		}
	}
	t.Lost = t.Acked - t.ReadBack
	return t
}

// Add adds o to t.
func (t *Tally) Add(o Tally) {
	t.Acked += o.Acked
	t.ReadBack += o.ReadBack
	t.Lost += o.Lost
	t.Duplicated += o.Duplicated
}

// String renders the counts as the summaries print them.
func (t Tally) String() string {
	return fmt.Sprintf("records_acked=%d records_read_back=%d records_lost=%d records_duplicated=%d", t.Acked, t.ReadBack, t.Lost, t.Duplicated)
}

// Totals sums the tallies of a run's seeds (or rows), failed ones
// included, and names the failed ones.
type Totals struct {
	Kind   string // what a run is, for the summary: "seeds", "rows"
	mu     sync.Mutex
	runs   int
	failed []string
	Tally
}

// Add records one seed's (or row's) tally and whether it failed.
func (t *Totals) Add(name string, tl Tally, failed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.runs++
	t.Tally.Add(tl)
	if failed {
		t.failed = append(t.failed, name)
	}
}

// String renders the totals: runs, failed runs (how many, and which), and
// the record counts, as "seeds=N failed_seeds=F failed=1,7 records_...".
func (t *Totals) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	kind := t.Kind
	if kind == "" {
		kind = "runs"
	}
	names := "none"
	if len(t.failed) > 0 {
		names = strings.Join(t.failed, ",")
	}
	return fmt.Sprintf("%s=%d failed_%s=%d failed=%s %s", kind, t.runs, kind, len(t.failed), names, t.Tally)
}
