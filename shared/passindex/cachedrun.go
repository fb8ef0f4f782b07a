package passindex

import (
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// CachedRun is the level-1 run of chain c at `at` if the window's cache
// holds it decoded, else nil: no GET, and the cache's order unchanged.
// (Settle's merge finds its group by the runs' headers, and takes a
// cached run's place from the cache instead of a GET.)
func (w *Window) CachedRun(c metastore.ChainID, at metastore.Cursor) *format.PassIndex {
	w.mu.Lock()
	defer w.mu.Unlock()
	el := w.cache[passAt{c, at, kindRun}]
	if el == nil {
		return nil
	}
	return el.Value.(*cacheEntry).p
}
