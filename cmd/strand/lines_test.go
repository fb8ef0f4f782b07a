package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/strandlog/strand/shared/format"
)

// TestLineReader: lines up to the record limit, "\n" or "\r\n" removed, a
// last line without a newline kept, a longer line named by number.
func TestLineReader(t *testing.T) {
	mib := strings.Repeat("x", format.MaxRecordBytes)
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{"", nil, ""},
		{"a\n\nb", []string{"a", "", "b"}, ""},
		{"a\r\nb\r\n", []string{"a", "b"}, ""},
		{mib + "\n" + mib, []string{mib, mib}, ""},
		{"a\n" + mib + "y\nb\n", []string{"a"}, "line 2 is longer than 1048576 bytes"},
		{mib + "yz", nil, "line 1 is longer"},
	} {
		lr := newLineReader(strings.NewReader(tc.in))
		var got []string
		var err error
		for {
			var l []byte
			if l, err = lr.next(); err != nil {
				break
			}
			got = append(got, string(l))
		}
		if errors.Is(err, io.EOF) {
			err = nil
		}
		if len(got) != len(tc.want) || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%.20q: %d lines, %v; want %d, %q", tc.in, len(got), err, len(tc.want), tc.err)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%.20q: line %d differs", tc.in, i)
			}
		}
	}
}

// FuzzLineReader: any input splits into lines that, joined back with
// "\n", give the input (less "\r" before each "\n" and a last "\n").
func FuzzLineReader(f *testing.F) {
	f.Add([]byte("a\nb\r\nc"))
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		lr := newLineReader(bytes.NewReader(in))
		var lines [][]byte
		for {
			l, err := lr.next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err) // inputs here are far under the limit
			}
			lines = append(lines, l)
		}
		want := bytes.ReplaceAll(in, []byte("\r\n"), []byte("\n"))
		want = bytes.TrimSuffix(want, []byte("\n"))
		if got := bytes.Join(lines, []byte("\n")); !bytes.Equal(got, want) && !(len(in) > 0 && bytes.HasSuffix(in, []byte("\r"))) {
			t.Fatalf("%q -> %q", in, lines)
		}
	})
}
