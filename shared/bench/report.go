package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Line is a one-line summary of r.
func (r Result) Line() string {
	if rs := r.Read; rs != nil && rs.Workload == WorkCatchup {
		return fmt.Sprintf("%s: %d readers/stream, %.1f MB/s aggregate (reader min %.1f, mean %.1f), %.0f records/s, %.1f chain + %.1f settled GETs/GiB, %.1f metastore reads/GiB, %.2f CPU-s/GiB, $%.6f/GiB",
			r.Name, rs.Readers, rs.MBps, rs.ReaderMBpsMin, rs.ReaderMBpsMean, rs.RecordsPerSec, rs.ChainGetsPerGB, rs.SettledGetsPerGB, rs.MetaReadsPerGB, rs.CPUSecondsPerGB, rs.Cost.Total)
	}
	if rs := r.Read; rs != nil {
		return fmt.Sprintf("%s: %d readers/stream, ack p50 %.2f p99 %.2f p999 %.2f ms, end-to-end p50 %.2f p99 %.2f p999 %.2f ms (gap p99 %+.2f ms), %.1f MB/s written, %.1f MB/s delivered, %.2f CPU-s/GiB delivered",
			r.Name, rs.Readers, r.Ack.P50, r.Ack.P99, r.Ack.P999, rs.EndToEnd.P50, rs.EndToEnd.P99, rs.EndToEnd.P999, rs.GapP99Ms, r.MBps, rs.MBps, rs.CPUSecondsPerGB)
	}
	s := fmt.Sprintf("%s: %.1f MB/s, %.0f records/s, ack p50 %.2f p99 %.2f p999 %.2f ms", r.Name, r.MBps, r.RecordsPerSec, r.Ack.P50, r.Ack.P99, r.Ack.P999)
	if r.Overhead.N > 0 {
		s += fmt.Sprintf(", overhead p50 %.3f p99 %.3f ms (ordered p99 %.3f)", r.Overhead.P50, r.Overhead.P99, r.OrderedOverhead.P99)
	}
	if r.Mode != ModeRemote {
		s += fmt.Sprintf(", %.0f PUTs/GB, %.1f metastore ops/s", r.PutsPerGB, r.MetaOpsPerSec)
	}
	if r.Errors > 0 {
		s += fmt.Sprintf(", %d errors", r.Errors)
	}
	return s
}

// WriteJSON writes the results as an indented JSON array.
func WriteJSON(w io.Writer, rs []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rs)
}

// WriteText writes a human-readable report of every result.
func WriteText(w io.Writer, rs []Result) error {
	var b strings.Builder
	pct := func(name string, p Percentiles) {
		if p.N > 0 {
			fmt.Fprintf(&b, "  %-26s p50 %9.3f  p99 %9.3f  p999 %9.3f  max %9.3f ms  (n=%d)\n", name, p.P50, p.P99, p.P999, p.Max, p.N)
		}
	}
	for _, r := range rs {
		if r.Read != nil && r.Read.Workload == WorkCatchup {
			writeCatchup(&b, r)
			continue
		}
		fmt.Fprintf(&b, "== %s\n", r.Name)
		fmt.Fprintf(&b, "  %d producers, %d streams, %d-byte records, %d records/batch, offered %s, window %.1fs\n",
			r.Producers, r.Streams, r.RecordBytes, r.RecordsPerBatch, offered(r.OfferedMBps), r.Seconds)
		if r.FlushDeadlineMs > 0 {
			fmt.Fprintf(&b, "  flush deadline             %g ms, idle cut %v\n", r.FlushDeadlineMs, r.IdleCut)
		}
		fmt.Fprintf(&b, "  throughput                 %.1f MB/s, %.0f records/s, %d batches, %d errors\n", r.MBps, r.RecordsPerSec, r.Batches, r.Errors)
		pct("ack latency", r.Ack)
		if rd := r.Read; rd != nil {
			pct(fmt.Sprintf("end-to-end (%d readers)", rd.Readers*r.Streams), rd.EndToEnd)
			fmt.Fprintf(&b, "  end-to-end - ack            p50 %+9.3f  p99 %+9.3f  p999 %+9.3f ms; %.1f MB/s delivered, %.1f CPU-s (%.2f per GiB delivered)\n",
				rd.GapP50Ms, rd.GapP99Ms, rd.GapP999Ms, rd.MBps, rd.CPUSeconds, rd.CPUSecondsPerGB)
		}
		if r.OfferedMBps > 0 {
			pct("  send lag (behind schedule)", r.SendLag)
		}
		pct("floor (cut wait + W-th PUT)", r.Floor)
		pct("  wait for the cut", r.CutWait)
		pct("  W-th PUT (per flight)", r.QuorumPut)
		pct("overhead (ack - floor)", r.Overhead)
		pct("overhead at release", r.ReleaseOverhead)
		pct("overhead, ordered floor", r.OrderedOverhead)
		if r.Mode != ModeRemote {
			fmt.Fprintf(&b, "  flights                    %d, mean %.0f KiB; %.0f chain PUTs per GiB\n", r.Flights, r.MeanFlightKiB, r.PutsPerGB)
			fmt.Fprintf(&b, "  metastore                  %.1f item writes/s, %.1f WRU/s, %.1f RRU/s; %.1f ops/s (%.1f writes/s):",
				r.MetaItemWritesPerSec, r.MetaWRUPerSec, r.MetaRRUPerSec, r.MetaOpsPerSec, r.MetaWritesPerSec)
			var ops []string
			for op := range r.MetaOps {
				ops = append(ops, op)
			}
			sort.Strings(ops)
			for _, op := range ops {
				fmt.Fprintf(&b, " %s %d", op, r.MetaOps[op])
			}
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "  memory                     peak heap %.0f MiB, peak from OS %.0f MiB, buckets held peak %.0f MiB\n", r.PeakHeapMiB, r.PeakTotalMiB, r.PeakStoreMiB)
		if r.CPUSeconds > 0 {
			fmt.Fprintf(&b, "  CPU                        %.1f s in the window, %.2f CPU-s per GiB acked (the whole process); machine load average %.2f\n", r.CPUSeconds, r.CPUSecondsPerGB, r.LoadAvg)
		}
		if w := r.SchedWait; w.N > 0 {
			fmt.Fprintf(&b, "  waits for a processor      p50 %.3f p99 %.3f p999 %.3f max %.3f ms (%d sampled); GC stop-the-world p99 %.3f max %.3f ms (%d)\n",
				w.P50, w.P99, w.P999, w.Max, w.N, r.GCPause.P99, r.GCPause.Max, r.GCPause.N)
		}
		if h := r.Heap; h != nil {
			fmt.Fprintf(&b, "  heap in use after GC       %.0f MiB before the star, %.0f MiB with the streams open (%.0f bytes per stream), %.0f MiB at the end\n", h.BaseMiB, h.OpenMiB, h.PerStream, h.EndMiB)
		}
		if c := r.Cost; c != nil {
			fmt.Fprintf(&b, "  cost $/GiB                 %.6f = PUTs %.6f + upload %.6f + cross-AZ %.6f + transit storage %.6f + metastore %.6f + absorb Lambda/SQS %.6f + settle PUTs %.6f; metastore $%.4f/h, %.0f%% of $/GiB\n",
				c.Total, c.ChainPuts, c.ChainUpload, c.CrossAZ, c.TransitStore, c.Metastore, c.Lambda, c.SettlePuts, c.MetastorePerH, 100*c.MetastoreShare)
			if c.IndexPuts > 0 {
				fmt.Fprintf(&b, "  pass index                 index PUTs %.6f $/GiB (in the total)\n", c.IndexPuts)
			}
			if c.SettleMeasured {
				fmt.Fprintf(&b, "  settle in the window       settle PUTs and LISTs %.6f + GETs (absorb and settle) %.6f $/GiB (in the total)\n", c.SettlePuts, c.Gets)
			}
		}
		if s := r.Settle; s != nil {
			fmt.Fprintf(&b, "  settle (every %g s)         %d steps, %d streams packed into runs, %d packs, %d flushes (%d SettleRef), %d S3 PUTs and LISTs, %d failed runs; flush at %d bytes or %.0f s; %d merges (fanout %d, %d stream entries merged)\n",
				s.EveryS, s.Steps, s.Packed, s.Packs, s.Flushes, s.SettleRefs, s.Requests, s.Errors, s.FlushBytes, s.FlushAgeS, s.Merges, s.Fanout, s.MergedStreams)
			fmt.Fprintf(&b, "  settle's pace              settled %d slots, %.1f MB in the window (%.1f MB/s); behind the checkpoint at its end by %d slots, %.1f MB\n",
				s.Slots, s.MB, s.MBps, s.BehindSlots, s.BehindMB)
		}
		if nb := r.Baseline; nb != nil {
			fmt.Fprintf(&b, "  naive baseline             %.1f MB/s, ack p50 %.2f p99 %.2f ms, %.0f PUTs/GiB, %.1f metastore writes/s, $%.6f/GiB\n",
				nb.MBps, nb.Ack.P50, nb.Ack.P99, nb.PutsPerGB, nb.MetaWritesPerSec, nb.Cost.Total)
			fmt.Fprintf(&b, "  naive / strand             PUTs per GiB x%.1f, metastore writes/s x%.1f, cost per GiB x%.1f; strand / naive throughput x%.2f\n",
				nb.PutsPerGBRatio, nb.MetaWritesRatio, nb.CostPerGBRatio, nb.ThroughputRatio)
			if r.Cost != nil {
				if why := costGap(*r.Cost, nb.Cost); why != "" {
					fmt.Fprintf(&b, "  why naive costs less       %s\n", why)
				}
			}
		}
	}
	writeStreamsTables(&b, rs)
	_, err := io.WriteString(w, b.String())
	return err
}

func offered(r float64) string {
	if r == 0 {
		return "unthrottled"
	}
	return fmt.Sprintf("%g MB/s", r)
}

func writeCatchup(b *strings.Builder, r Result) {
	rd := r.Read
	fmt.Fprintf(b, "== %s\n", r.Name)
	fmt.Fprintf(b, "  %d streams x %d readers from seq 0 over a %.0f MB backlog (%d%% settled, the rest in transit slots), %d-byte records\n",
		r.Streams, rd.Readers, rd.BacklogMB, rd.SettledPct, r.RecordBytes)
	fmt.Fprintf(b, "  throughput                 %.1f MB/s, %.0f records/s aggregate over %.2fs; per reader min %.1f mean %.1f MB/s\n",
		rd.MBps, rd.RecordsPerSec, rd.Seconds, rd.ReaderMBpsMin, rd.ReaderMBpsMean)
	fmt.Fprintf(b, "  requests per GiB read       %.1f chain GETs, %.1f settled GETs, %.1f metastore read units; %.2f bytes fetched per byte read\n",
		rd.ChainGetsPerGB, rd.SettledGetsPerGB, rd.MetaReadsPerGB, rd.GetBytesPerByte)
	fmt.Fprintf(b, "  CPU                        %.1f s (%.2f per GiB read); peak heap %.0f MiB\n", rd.CPUSeconds, rd.CPUSecondsPerGB, r.PeakHeapMiB)
	c := rd.Cost
	fmt.Fprintf(b, "  read cost $/GiB            %.6f = chain GETs %.6f + Express retrieval %.6f + settled GETs %.6f + metastore %.6f\n",
		c.Total, c.ChainGets, c.Retrieval, c.SettledGets, c.Metastore)
}
