package bench

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// The many-streams view: runs that differ only in their stream count
// (`strand bench --streams 1000,10000,100000`) are grouped, and each group
// is reported as a table with one row per count (WriteText, at the end)
// and a plot against the count (Run, with a plot directory).

// streamsKey is r's name without its stream count: the group it belongs to.
var streamsField = regexp.MustCompile(`-s\d+-`)

func streamsKey(r Result) string { return streamsField.ReplaceAllString(r.Name, "-streams-") }

// streamGroups groups the write results (in-process or API) that differ
// only by stream count, in first-seen order, each by ascending count;
// groups of one count are left out.
func streamGroups(rs []Result) [][]Result {
	var keys []string
	by := map[string][]Result{}
	for _, r := range rs {
		if r.Read != nil || r.Mode == ModeRemote || r.Cost == nil {
			continue
		}
		k := streamsKey(r)
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], r)
	}
	var out [][]Result
	for _, k := range keys {
		g := by[k]
		if len(g) < 2 {
			continue
		}
		slices.SortStableFunc(g, func(a, b Result) int { return a.Streams - b.Streams })
		out = append(out, g)
	}
	return out
}

// writeStreamsTables writes, per group, a Markdown table with one row per
// stream count: what grows with streams.
func writeStreamsTables(b *strings.Builder, rs []Result) {
	for _, g := range streamGroups(rs) {
		fmt.Fprintf(b, "\n== %s: against the stream count\n\n", streamsKey(g[0]))
		b.WriteString("| streams | MB/s | batches/s | metastore item writes/s | WRU/s | RRU/s | metastore $/h | metastore share of $/GiB | $/GiB | chain PUTs/GiB | heap, streams open (MiB) | heap at end (MiB) | ack p99 ms |\n")
		b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
		for _, r := range g {
			open, end := "-", "-"
			if h := r.Heap; h != nil {
				open, end = fmt.Sprintf("%.0f", h.OpenMiB), fmt.Sprintf("%.0f", h.EndMiB)
			}
			fmt.Fprintf(b, "| %d | %.2f | %.0f | %.1f | %.1f | %.1f | %.4f | %.0f%% | %.6f | %.0f | %s | %s | %.2f |\n",
				r.Streams, r.MBps, float64(r.Batches)/max(r.Seconds, 1e-9), r.MetaItemWritesPerSec, r.MetaWRUPerSec, r.MetaRRUPerSec,
				r.Cost.MetastorePerH, 100*r.Cost.MetastoreShare, r.Cost.Total, r.PutsPerGB, open, end, r.Ack.P99)
		}
	}
}

// writeStreamsPlots writes <dir>/<group>.svg for every group of runs that
// differ only by stream count.
func writeStreamsPlots(dir string, rs []Result) error {
	for _, g := range streamGroups(rs) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("bench: plots: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, streamsKey(g[0])+".svg"), []byte(streamsSVG(g)), 0o644); err != nil {
			return fmt.Errorf("bench: plots: %w", err)
		}
	}
	return nil
}

// streamsSVG plots a group's figures against the stream count, both axes
// log-scale: metastore item writes/s, WRU/s, metastore $/h x 100 and the
// heap at the window's end (MiB).
func streamsSVG(g []Result) string {
	var b strings.Builder
	svgHead(&b, fmt.Sprintf("%s: against the stream count", streamsKey(g[0])))
	type series struct {
		name, color string
		y           func(Result) float64
	}
	ss := []series{
		{"metastore item writes/s", "#d62728", func(r Result) float64 { return r.MetaItemWritesPerSec }},
		{"write request units/s", "#ff7f0e", func(r Result) float64 { return r.MetaWRUPerSec }},
		{"metastore $/h x 100", "#9467bd", func(r Result) float64 { return 100 * r.Cost.MetastorePerH }},
		{"heap at end, MiB", "#1f77b4", func(r Result) float64 {
			if r.Heap == nil {
				return 0
			}
			return r.Heap.EndMiB
		}},
		{"chain PUTs per GiB", "#2ca02c", func(r Result) float64 { return r.PutsPerGB }},
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, r := range g {
			if v := s.y(r); v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 1, 10
	}
	ylo, yhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if yhi <= ylo {
		yhi = ylo + 1
	}
	xlo, xhi := math.Log10(float64(g[0].Streams)), math.Log10(float64(g[len(g)-1].Streams))
	if xhi <= xlo {
		xhi = xlo + 1
	}
	px := func(n int) float64 { return float64(padL) + (math.Log10(float64(n))-xlo)/(xhi-xlo)*innerW }
	py := func(v float64) float64 { return float64(padT+innerH) - (math.Log10(v)-ylo)/(yhi-ylo)*innerH }
	for e := ylo; e <= yhi+1e-9; e++ {
		y := py(math.Pow(10, e))
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%g</text>`+"\n", padL, y, padL+innerW, y, padL-6, y+4, math.Pow(10, e))
	}
	for _, r := range g {
		x := px(r.Streams)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ccc"/><text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", x, padT, x, padT+innerH, x, padT+innerH+16, r.Streams)
	}
	for i, s := range ss {
		var pts []string
		for _, r := range g {
			if v := s.y(r); v > 0 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(r.Streams), py(v)))
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", px(r.Streams), py(v), s.color)
			}
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", s.color, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			padL+8, padT+5+16*i, s.color, padL+26, padT+16+16*i, esc(s.name))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">streams (log scale)</text>`+"\n", padL+innerW/2, plotH-10)
	b.WriteString("</svg>\n")
	return b.String()
}
