package main

import (
	"testing"
	"time"
)

// TestScheduleCountsFromTheDueTime: a record's latency counts from its
// place on the schedule, so a record sent late is charged for the wait.
func TestScheduleCountsFromTheDueTime(t *testing.T) {
	s := newSchedule(0.5, 1000) // 1,000-byte records at 0.5 MB/s: one every 2 ms
	if s.gap != 2*time.Millisecond {
		t.Fatalf("gap %v, want 2ms", s.gap)
	}
	s.t0 = time.Now().Add(-time.Second) // record 0 was due a second ago
	l := newLatencies(s, 10)
	i, err := l.received(body(3, 16))
	if err != nil || i != 3 {
		t.Fatalf("received: %d, %v", i, err)
	}
	if l.e2e[3] < time.Second-6*time.Millisecond {
		t.Fatalf("record 3's latency %v: not counted from its due time (t0 + 6 ms, a second ago)", l.e2e[3])
	}
	if _, err := l.received(body(10, 16)); err == nil {
		t.Fatal("a record outside the run was taken")
	}
	if _, err := l.received([]byte{1}); err == nil {
		t.Fatal("a short record was taken")
	}
}

func TestQuantile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct{ q, want float64 }{{0.5, 50}, {0.99, 99}, {1, 100}, {0, 1}} {
		if got := quantile(ds, c.q); got != c.want {
			t.Errorf("quantile %v: %v ms, want %v", c.q, got, c.want)
		}
	}
	if ds[0] != 100*time.Millisecond {
		t.Error("quantile sorted its argument in place")
	}
	if quantile(nil, 0.5) != 0 {
		t.Error("quantile of nothing")
	}
}
