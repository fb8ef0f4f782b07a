package read

import (
	"context"
	"fmt"
	"sync"

	"github.com/strandlog/strand/shared/objstore"
)

// PartBytes is the largest ranged GET of a settled location: a larger one
// is fetched as parts of PartBytes at once and put together. One GET
// streams at about 90 MB/s (S3, per connection), so a settled location of
// tens of MB read by one GET kept a reader under that, whatever its
// read-ahead; parts read it at the bandwidth of as many connections, for
// one more first byte per part (4 MiB parts: 256 GETs per GiB).
const PartBytes = 4 << 20

// getParts reads n bytes at off of key, by parts of PartBytes in parallel
// when n is larger, each read into its place in one buffer. A part shorter
// than asked fails the read.
func getParts(ctx context.Context, b objstore.Bucket, key string, off, n int64) ([]byte, error) {
	if n <= PartBytes {
		return b.Get(ctx, key, off, n)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	buf := make([]byte, n)
	parts := int((n + PartBytes - 1) / PartBytes)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error // the part that failed first (the others see the cancel)
	)
	for i := range parts {
		lo := int64(i) * PartBytes
		m := min(PartBytes, n-lo)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Into the one buffer (objstore.ReaderInto): no buffer and no
			// copy per part (the copy was a third of an in-process
			// catch-up's CPU).
			got, err := objstore.GetInto(ctx, b, key, off+lo, buf[lo:lo+m])
			if err == nil && int64(got) != m {
				err = fmt.Errorf("%w: part %d+%d of %s: %d bytes", ErrCorrupt, off+lo, m, key, got)
			}
			if err == nil {
				return
			}
			mu.Lock()
			if first == nil {
				first = err
			}
			mu.Unlock()
			cancel() // the others are wasted now
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return buf, nil
}
