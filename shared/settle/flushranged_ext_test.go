package settle_test

import (
	"fmt"
	"testing"

	"github.com/strandlog/strand/shared/passindex"
	"github.com/strandlog/strand/shared/settle"
)

// keptFlushPath ("": each step's choice) is the flush path of the kept
// world's settlers in keptStateRun (TestSettleKeptStateRangedFlush sets
// it); with "ranged", their window's budget is 1 byte, so every run a
// flush's lookup meets is read by range.
var keptFlushPath string

// keptWindows are the windows keptFlush made (their ranged lookups are
// counted).
var keptWindows []*passindex.Window

// keptFlush sets s's flush path and window as keptFlushPath says.
func (e *env) keptFlush(s *settle.Settler) {
	if keptFlushPath == "" {
		return
	}
	s.SetFlushPath(keptFlushPath)
	if keptFlushPath == "ranged" {
		s.Window = &passindex.Window{Meta: e.mem, Bucket: e.settled, MaxBytes: 1}
		keptWindows = append(keptWindows, s.Window)
	}
}

// TestSettleKeptStateRangedFlush is TestSettleKeptStateMatchesScratch
// with every flush of the kept world's steps getting its streams'
// entries by per-stream lookups read by range (issue 17, "Flushes past
// the window budget"), against the scratch world's steps holding the
// runs: the settled buckets are the same byte for byte, the heads and
// the refs the same.
func TestSettleKeptStateRangedFlush(t *testing.T) {
	keptFlushPath = "ranged"
	defer func() { keptFlushPath, keptWindows = "", nil }()
	seeds := 100
	if testing.Short() {
		seeds = 3
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { keptStateRun(t, seed, false) })
	}
	var objects, gets int64
	for _, w := range keptWindows {
		st := w.Stats()
		objects, gets = objects+st.Ranged, gets+st.RangedGets
	}
	t.Logf("%d runs read by range, %d ranged GETs", objects, gets)
	if objects == 0 {
		t.Fatal("no run read by range: the ranged path was not taken")
	}
}
