package promtest

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/strandlog/strand/shared/metrics"
)

// FuzzLookup: a series whose label values hold any text (quotes,
// backslashes, commas, braces, newlines), asked for with its labels in
// either order, reads back the value the registry holds; a value that
// differs is not found; and no line of any exposition makes Lookup panic.
func FuzzLookup(f *testing.F) {
	f.Add("express", "metastore_slow", uint16(3))
	f.Add(`a"b`, `c\d,e}`, uint16(0))
	f.Add("x\ny", "", uint16(65535))
	f.Fuzz(func(t *testing.T, a, b string, v uint16) {
		if !utf8.ValidString(a) || !utf8.ValidString(b) {
			t.Skip("label values are UTF-8")
		}
		r := metrics.NewRegistry()
		r.Counter("x_total", "X.", "a", a, "b", b).Add(uint64(v))
		exp := Render(r)
		esc := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace
		for _, series := range []string{
			`x_total{a="` + esc(a) + `",b="` + esc(b) + `"}`,
			`x_total{b="` + esc(b) + `",a="` + esc(a) + `"}`,
		} {
			got, err := Lookup(exp, series)
			if err != nil || got != float64(v) {
				t.Fatalf("%s in\n%s: %v %v, want %d", series, exp, got, err, v)
			}
		}
		if _, err := Lookup(exp, `x_total{a="`+esc(a)+`",b="`+esc(b+"!")+`"}`); err == nil {
			t.Fatalf("another value of b found in\n%s", exp)
		}
		_, _ = Lookup(a+" "+b, a) // arbitrary text: an answer or an error, never a panic
	})
}
