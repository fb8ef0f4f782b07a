package kafka

import (
	"bytes"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// compressFor compresses b with c as a producer would.
func compressFor(t *testing.T, c codec, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch c {
	case codecGzip:
		w := gzip.NewWriter(&buf)
		w.Write(b)
		w.Close()
	case codecSnappy:
		return s2.EncodeSnappy(nil, b)
	case codecLZ4:
		w := lz4.NewWriter(&buf)
		w.Write(b)
		w.Close()
	case codecZstd:
		e, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		return e.EncodeAll(b, nil)
	default:
		return b
	}
	return buf.Bytes()
}

// TestXerialSnappy: snappy in the Java clients' xerial framing decodes,
// block by block, within the bound.
func TestXerialSnappy(t *testing.T) {
	want := bytes.Repeat([]byte("strand"), 20000)
	framed := append([]byte{}, xerialMagic...)
	framed = append(framed, 0, 0, 0, 1, 0, 0, 0, 1)
	for rest := want; len(rest) > 0; {
		n := min(len(rest), 32<<10)
		blk := s2.EncodeSnappy(nil, rest[:n])
		framed = append(framed, byte(len(blk)>>24), byte(len(blk)>>16), byte(len(blk)>>8), byte(len(blk)))
		framed = append(framed, blk...)
		rest = rest[n:]
	}
	got, err := decompress(codecSnappy, framed, len(want))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("xerial: %d bytes, %v", len(got), err)
	}
	if _, err := decompress(codecSnappy, framed, len(want)-1); err == nil {
		t.Fatal("xerial past the bound decoded")
	}
}
