package sim

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"sync"

	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/probe"
	"github.com/strandlog/strand/shared/settle"
)

// errSettleKilled: a KilledSettler's copy died.
var errSettleKilled = errors.New("sim: settle copy killed")

// KilledSettler is a settle copy of the other deploy's configuration
// (Settler; the long-lived KeptSettler has the first) that dies at its
// k-th PUT to the settled
// bucket: that PUT and every call to the bucket after it fail, as a
// Lambda that times out or crashes mid-step does (issue 30): between two
// packs, between its packs and its run index (the step's commit point),
// between its run and its flushes. What it wrote before dying must never
// collide with what the copies after it write, whatever their
// configuration, and they must still settle (the drain's settle fails on
// any error).
func (w *World) KilledSettler(k int) *settle.Settler {
	s := w.settler(true)
	s.Settled = &killAtPut{Bucket: s.Settled, left: k}
	return s
}

// killAtPut is a bucket that dies at its k-th PutIfAbsent.
type killAtPut struct {
	objstore.Bucket
	mu   sync.Mutex
	left int
	dead bool
}

var _ objstore.Bucket = (*killAtPut)(nil)

// alive counts a PUT when put, and reports whether the copy still lives.
func (b *killAtPut) alive(put bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if put && !b.dead {
		if b.left == 0 {
			b.dead = true
		}
		b.left--
	}
	return !b.dead
}

func (b *killAtPut) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	if !b.alive(true) {
		return fmt.Errorf("put %s: %w", key, errSettleKilled)
	}
	return b.Bucket.PutIfAbsent(ctx, key, body)
}

func (b *killAtPut) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if !b.alive(false) {
		return nil, fmt.Errorf("get %s: %w", key, errSettleKilled)
	}
	return b.Bucket.Get(ctx, key, off, n)
}

func (b *killAtPut) Head(ctx context.Context, key string) (int64, error) {
	if !b.alive(false) {
		return 0, fmt.Errorf("head %s: %w", key, errSettleKilled)
	}
	return b.Bucket.Head(ctx, key)
}

func (b *killAtPut) Delete(ctx context.Context, key string) error {
	if !b.alive(false) {
		return fmt.Errorf("delete %s: %w", key, errSettleKilled)
	}
	return b.Bucket.Delete(ctx, key)
}

func (b *killAtPut) List(ctx context.Context, prefix string) ([]string, error) {
	if !b.alive(false) {
		return nil, fmt.Errorf("list %s: %w", prefix, errSettleKilled)
	}
	return b.Bucket.List(ctx, prefix)
}

// Determined records every PutIfAbsent to the settled bucket, by any
// copy of the absorb, settle or trim, and the CRC of the first bytes put
// at each key. Every key there but a run's or a merged run's (the settle
// step's commit point: the first plan stored is the run, design 014 "One
// commit point per step") is determined: its bytes are a function of the
// key (a pass index of its slots, a pack of its plan's digest, a settled
// object of its stream's seqs, a command index of its run). A put of
// other bytes at one is a violation (checkDetermined), whether the store
// refused it or not.
type Determined struct {
	objstore.Bucket
	mu         sync.Mutex
	first      map[string]uint32
	violations []string
}

var _ objstore.Bucket = (*Determined)(nil)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (d *Determined) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	if !commitPoint(key) {
		sum := crc32.Checksum(body, castagnoli)
		d.mu.Lock()
		if d.first == nil {
			d.first = map[string]uint32{}
		}
		if got, ok := d.first[key]; !ok {
			d.first[key] = sum
		} else if got != sum {
			d.violations = append(d.violations, key)
		}
		d.mu.Unlock()
	}
	return d.Bucket.PutIfAbsent(ctx, key, body)
}

// Violations returns the determined keys put with other bytes so far.
func (d *Determined) Violations() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.violations...)
}

// commitPoint reports whether key is a run's or a merged run's index,
// or not a determined key at all: the garbage probe's orphan markers
// hold when a sweep first found the orphan, and of two sweeps racing the
// first marker wins (PutIfAbsent), as the probe intends.
func commitPoint(key string) bool {
	if strings.HasPrefix(key, probe.MarkPrefix) {
		return true
	}
	if !strings.HasPrefix(key, "index/") || strings.HasSuffix(key, ".cmdx") {
		return false
	}
	return strings.Contains(key, "/runs/") || strings.Contains(key, "/merged/")
}
