package dir

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkPutIfAbsent: one chain slot's body per put, into keys laid out
// as the chain lays them out (one directory per epoch), from several
// goroutines as the star's uploads do, staged as anonymous files (where
// the filesystem has them) and as named temp files. It reports the
// process's CPU time (user and system) per put next to the wall time: the
// puts mostly wait on fsync, which costs wall time, not CPU. Not in the
// default run (benchmarks run only with -bench).
func BenchmarkPutIfAbsent(b *testing.B) {
	for _, size := range []int{4 << 10, 256 << 10} {
		for _, anon := range []bool{true, false} {
			b.Run(fmt.Sprintf("%dKiB/anon=%v", size>>10, anon), func(b *testing.B) {
				bkt, err := Open(b.TempDir(), "bkt")
				if err != nil {
					b.Fatal(err)
				}
				if anon && !bkt.anon {
					b.Skip("no anonymous files on this filesystem")
				}
				bkt.anon = anon
				body := make([]byte, size)
				var seq atomic.Int64
				b.SetBytes(int64(size))
				b.SetParallelism(2)
				cpu0 := cpuTime(b)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						key := fmt.Sprintf("chains/star-0/00000000000000000001/%020d", seq.Add(1))
						if err := bkt.PutIfAbsent(context.Background(), key, body); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPutSet: one op is one chain slot put to a set of three buckets
// under one root at once, as the star writes an Express flight on `strand
// dev`, with the copies sharing one staged body (share.go) and without.
func BenchmarkPutSet(b *testing.B) {
	for _, size := range []int{1 << 20, 8 << 20} {
		for _, share := range []bool{true, false} {
			b.Run(fmt.Sprintf("%dMiB/share=%v", size>>20, share), func(b *testing.B) {
				root := b.TempDir()
				var set []*Bucket
				for i := range 3 {
					bkt, err := Open(root, fmt.Sprintf("express-%d", i))
					if err != nil {
						b.Fatal(err)
					}
					if !bkt.anon {
						b.Skip("no anonymous files on this filesystem")
					}
					if !share {
						bkt.share = nil
					}
					set = append(set, bkt)
				}
				body := make([]byte, size)
				b.SetBytes(int64(size))
				cpu0 := cpuTime(b)
				b.ResetTimer()
				for i := range b.N {
					key := fmt.Sprintf("chains/star-0/00000000000000000001/%020d", i)
					var wg sync.WaitGroup
					for _, bkt := range set {
						wg.Add(1)
						go func() {
							defer wg.Done()
							if err := bkt.PutIfAbsent(context.Background(), key, body); err != nil {
								b.Error(err)
							}
						}()
					}
					wg.Wait()
				}
				b.StopTimer()
				b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
	}
}
