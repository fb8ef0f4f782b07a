package promtest

import (
	"errors"
	"runtime"
	"testing"

	"github.com/strandlog/strand/shared/metrics"
)

func TestLookup(t *testing.T) {
	r := metrics.NewRegistry()
	r.Counter("strand_epoch_halts_total", "Epoch halts.", "class", "express").Add(3)
	r.Counter("strand_epoch_halts_total_other", "A longer name with the same prefix.", "class", "express").Add(7)
	exp := Render(r)
	if v, err := Lookup(exp, `strand_epoch_halts_total{class="express"}`); err != nil || v != 3 {
		t.Fatalf("halts: %v %v, want 3", v, err)
	}
	for _, missing := range []string{`strand_epoch_halts_total{class="standard"}`, `strand_epoch_halt_total{class="express"}`, `strand_epoch_halts_total`} {
		if v, err := Lookup(exp, missing); !errors.Is(err, ErrMissing) {
			t.Errorf("%s: %v %v, want ErrMissing", missing, v, err)
		}
	}
	if _, err := Lookup("x{a=\"b\"} notanumber\n", `x{a="b"}`); err == nil || errors.Is(err, ErrMissing) {
		t.Errorf("a malformed value: %v, want a parse error", err)
	}
}

// TestValueFailsOnAMissingSeries: Value fails the test, it does not read 0.
func TestValueFailsOnAMissingSeries(t *testing.T) {
	r := metrics.NewRegistry()
	ft := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Value(ft, r, `strand_epoch_halts_total{class="express"}`)
	}()
	<-done
	if !ft.failed {
		t.Fatal("Value read a missing series without failing")
	}
}

// fakeTB records Fatal instead of stopping the real test.
type fakeTB struct {
	testing.TB
	failed bool
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatal(args ...any) {
	f.failed = true
	runtime.Goexit()
}

// TestLookupLabelsInAnyOrder: a series written with its labels in another
// order than the exposition's (client_golang sorts them) is found; other
// values or a subset of the labels are not.
func TestLookupLabelsInAnyOrder(t *testing.T) {
	r := metrics.NewRegistry()
	r.Counter("strand_backlog_stalls_total", "Stalls.", "class", "express", "cause", "metastore_slow").Add(2)
	r.Counter("strand_backlog_stalls_total", "Stalls.", "class", "express", "cause", "absorb_lagging").Add(5)
	exp := Render(r)
	for series, want := range map[string]float64{
		`strand_backlog_stalls_total{class="express",cause="metastore_slow"}`: 2,
		`strand_backlog_stalls_total{cause="metastore_slow",class="express"}`: 2,
		`strand_backlog_stalls_total{class="express",cause="absorb_lagging"}`: 5,
	} {
		if v, err := Lookup(exp, series); err != nil || v != want {
			t.Errorf("%s: %v %v, want %v", series, v, err, want)
		}
	}
	for _, missing := range []string{`strand_backlog_stalls_total{class="express"}`, `strand_backlog_stalls_total{class="standard",cause="metastore_slow"}`,
		`strand_backlog_stalls_total{class="express",cause="metastore_slow",kind="x"}`} {
		if _, err := Lookup(exp, missing); !errors.Is(err, ErrMissing) {
			t.Errorf("%s: %v, want ErrMissing", missing, err)
		}
	}
	if _, err := Lookup(exp, `strand_backlog_stalls_total{class="express`); err == nil || errors.Is(err, ErrMissing) {
		t.Errorf("a malformed series: %v, want an error that says so", err)
	}
}
