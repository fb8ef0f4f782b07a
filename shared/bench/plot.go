package bench

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// writePlots writes <dir>/<name>-latency.svg (histograms of ack latency and
// of the overhead above the floor, log-scale x) and <dir>/<name>-throughput.svg
// (MB/s per sample interval over the window). Plain SVG, no dependencies.
func writePlots(dir string, r *Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bench: plots: %w", err)
	}
	lat := latencySVG(r)
	if err := os.WriteFile(filepath.Join(dir, r.Name+"-latency.svg"), []byte(lat), 0o644); err != nil {
		return fmt.Errorf("bench: plots: %w", err)
	}
	tp := throughputSVG(r)
	if err := os.WriteFile(filepath.Join(dir, r.Name+"-throughput.svg"), []byte(tp), 0o644); err != nil {
		return fmt.Errorf("bench: plots: %w", err)
	}
	return nil
}

const (
	plotW, plotH             = 720, 360
	padL, padR, padT, padB   = 70, 20, 40, 50
	innerW, innerH           = plotW - padL - padR, plotH - padT - padB
	histLo, histHi, histBins = 0.01, 10000.0, 60 // ms, log-spaced
)

func svgHead(b *strings.Builder, title string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", plotW, plotH, plotW, plotH)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(b, `<text x="%d" y="22" font-size="14" font-weight="bold">%s</text>`+"\n", padL, esc(title))
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", padL, padT+innerH, padL+innerW, padT+innerH)
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", padL, padT, padL, padT+innerH)
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// bin is the log-spaced bin of v milliseconds.
func bin(v float64) int {
	v = math.Max(v, histLo)
	i := int(math.Log10(v/histLo) / math.Log10(histHi/histLo) * histBins)
	return max(0, min(i, histBins-1))
}

func histogram(xs []time.Duration) []float64 {
	h := make([]float64, histBins)
	for _, x := range xs {
		h[bin(ms(x))]++
	}
	for i := range h {
		h[i] /= float64(max(1, len(xs)))
	}
	return h
}

// histogramOf bins an HdrHistogram's recorded values (each bucket at its
// midpoint) like histogram.
func histogramOf(x *hist) []float64 {
	h := make([]float64, histBins)
	n := float64(max(1, x.h.TotalCount()))
	for _, b := range x.h.Distribution() {
		if b.Count > 0 {
			h[bin(ms(time.Duration((b.From+b.To)/2)-x.offset))] += float64(b.Count) / n
		}
	}
	return h
}

func latencySVG(r *Result) string {
	var b strings.Builder
	svgHead(&b, fmt.Sprintf("%s: ack latency and star overhead (fraction of batches)", r.Name))
	series := []struct {
		name, color string
		h           []float64
	}{{"ack latency", "#1f77b4", histogram(r.acks)}}
	if len(r.over) > 0 {
		pos := make([]time.Duration, 0, len(r.over))
		for _, o := range r.over {
			pos = append(pos, max(o, 0))
		}
		series = append(series, struct {
			name, color string
			h           []float64
		}{"overhead above the floor", "#d62728", histogram(pos)})
	}
	if r.e2e != nil {
		series = append(series, struct {
			name, color string
			h           []float64
		}{"end-to-end (records, readers)", "#2ca02c", histogramOf(r.e2e)})
	}
	top := 0.0
	for _, s := range series {
		for _, v := range s.h {
			top = math.Max(top, v)
		}
	}
	top = math.Max(top, 1e-9) * 1.1
	bw := float64(innerW) / histBins
	for si, s := range series {
		for i, v := range s.h {
			if v == 0 {
				continue
			}
			hh := v / top * innerH
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="0.55"/>`+"\n",
				float64(padL)+float64(i)*bw, float64(padT+innerH)-hh, bw-0.5, hh, s.color)
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s" fill-opacity="0.55"/><text x="%d" y="%d">%s</text>`+"\n",
			padL+innerW-230, padT+5+18*si, s.color, padL+innerW-212, padT+16+18*si, esc(s.name))
	}
	span := math.Log10(histHi / histLo)
	for e := math.Log10(histLo); e <= math.Log10(histHi)+1e-9; e++ {
		x := float64(padL) + (e-math.Log10(histLo))/span*innerW
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ccc"/><text x="%.1f" y="%d" text-anchor="middle">%g</text>`+"\n",
			x, padT, x, padT+innerH, x, padT+innerH+16, math.Pow(10, e))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">milliseconds (log scale)</text>`+"\n", padL+innerW/2, plotH-10)
	for i := 0; i <= 4; i++ {
		v := top / 4 * float64(i)
		y := float64(padT+innerH) - v/top*innerH
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%.2f</text>`+"\n", padL-6, y+4, v)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d">ack p50 %.2f p99 %.2f p999 %.2f ms; overhead p50 %.3f p99 %.3f ms</text>`+"\n",
		padL, padT-5, r.Ack.P50, r.Ack.P99, r.Ack.P999, r.Overhead.P50, r.Overhead.P99)
	b.WriteString("</svg>\n")
	return b.String()
}

func throughputSVG(r *Result) string {
	var b strings.Builder
	svgHead(&b, fmt.Sprintf("%s: acknowledged MB/s over time", r.Name))
	top := 0.0
	for _, v := range r.Timeline {
		top = math.Max(top, v)
	}
	top = math.Max(top, 1e-9) * 1.15
	n := len(r.Timeline)
	if n > 0 {
		var pts []string
		for i, v := range r.Timeline {
			x := float64(padL) + (float64(i)+0.5)/float64(n)*innerW
			y := float64(padT+innerH) - v/top*innerH
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="%s"/>`+"\n", strings.Join(pts, " "))
		y := float64(padT+innerH) - r.MBps/top*innerH
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#d62728" stroke-dasharray="4 3"/><text x="%d" y="%.1f" fill="#d62728">mean %.1f MB/s</text>`+"\n",
			padL, y, padL+innerW, y, padL+6, y-4, r.MBps)
	}
	for i := 0; i <= 4; i++ {
		v := top / 4 * float64(i)
		y := float64(padT+innerH) - v/top*innerH
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%.0f</text>`+"\n", padL, y, padL+innerW, y, padL-6, y+4, v)
	}
	for i := 0; i <= 5; i++ {
		x := float64(padL) + float64(i)/5*innerW
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%.1f</text>`+"\n", x, padT+innerH+16, r.Seconds*float64(i)/5)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">seconds into the measured window</text>`+"\n", padL+innerW/2, plotH-10)
	fmt.Fprintf(&b, `<text x="14" y="%d" transform="rotate(-90 14 %d)" text-anchor="middle">MB/s</text>`+"\n", padT+innerH/2, padT+innerH/2)
	b.WriteString("</svg>\n")
	return b.String()
}
