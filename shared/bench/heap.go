package bench

import "runtime"

// HeapFigures are the process's heap in use (MiB, after a GC) at three
// points of an in-process run, and what opening the streams added per
// stream. They cover the whole process: the star, the memory buckets and
// memory metastore (which stand in for S3 and DynamoDB), the bench's own
// trace of every batch; the star's own share per stream is measured apart
// (BenchmarkStreamMemory in shared/star).
type HeapFigures struct {
	BaseMiB   float64 `json:"base_mib"`   // before the star started
	OpenMiB   float64 `json:"open_mib"`   // every stream created and opened, nothing appended
	EndMiB    float64 `json:"end_mib"`    // at the window's end, producers stopped
	PerStream float64 `json:"per_stream"` // (open - base) / streams, bytes
}

// heapInuse collects garbage and reads the heap in use, in bytes.
func heapInuse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
