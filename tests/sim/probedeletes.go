package sim

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/probe"
)

// ProbeDeletes is the settled bucket as the garbage probe sees it: it
// records every object the probe deletes. The probe's orphan sweep may
// delete only settled objects (streams/<id>/<first>-<last>) and its own
// markers (probe/orphans/...); a delete of anything else (a pack, a run,
// a merged run, a pass index, a command index) is a violation whatever
// the window says. A deleted settled object is held to the sim's own
// ledger of acknowledged batches (not the system's refs, heads or runs):
// checkHistory reads every acknowledged record back after each step, so
// an object a head, ref or run still needed shows as a lost record at
// the step its deletion ran in.
type ProbeDeletes struct {
	objstore.Bucket
	mu         sync.Mutex
	settled    int64 // settled objects deleted (orphans)
	indexed    int64 // of them, while the probe ran on the pass index
	violations []string
	// Indexed reports whether the probe runs on the pass index now.
	Indexed func() bool
}

var _ objstore.Bucket = (*ProbeDeletes)(nil)

func (p *ProbeDeletes) Delete(ctx context.Context, key string) error {
	err := p.Bucket.Delete(ctx, key)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case strings.HasPrefix(key, probe.MarkPrefix):
	case strings.HasPrefix(key, probe.SettledPrefix):
		if _, _, _, ok := probe.ParseSettledKey(key); !ok {
			p.violations = append(p.violations, fmt.Sprintf("%s (not a settled key)", key))
		}
		if err == nil {
			p.settled++
			if p.Indexed != nil && p.Indexed() {
				p.indexed++
			}
		}
	default:
		p.violations = append(p.violations, key)
	}
	return err
}

// Deleted is how many settled objects the probe deleted, and how many of
// them on the pass index (runs, packs and merged runs in the window).
func (p *ProbeDeletes) Deleted() (settled, indexed int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.settled, p.indexed
}

// Violations is what the probe deleted outside settled objects and its
// markers.
func (p *ProbeDeletes) Violations() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.violations...)
}
