package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// codec is a record batch's compression (attributes bits 0-2). Wire format.
type codec int16

const (
	codecNone   codec = 0
	codecGzip   codec = 1
	codecSnappy codec = 2
	codecLZ4    codec = 3
	codecZstd   codec = 4
)

// ErrDecompress: a compressed batch that does not decompress, or whose
// codec is unknown.
var ErrDecompress = errors.New("kafka: cannot decompress record batch")

// xerialMagic starts snappy in the xerial framing the Java clients write;
// librdkafka and franz-go may send raw snappy.
var xerialMagic = []byte{130, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// decompress returns b decompressed with c, failing with ErrBatchTooLarge
// as soon as the output would pass max bytes: no codec is let allocate
// past it, whatever sizes the input claims.
func decompress(c codec, b []byte, max int) ([]byte, error) {
	if max < 0 {
		max = 0
	}
	switch c {
	case codecNone:
		if len(b) > max {
			return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrBatchTooLarge, len(b), max)
		}
		return b, nil
	case codecGzip:
		r, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrDecompress, err)
		}
		return readBounded(r, max, "gzip")
	case codecSnappy:
		if len(b) >= 16 && bytes.HasPrefix(b, xerialMagic) {
			return xerial(b[16:], max)
		}
		return snappyBlock(nil, b, max)
	case codecLZ4:
		return readBounded(lz4.NewReader(bytes.NewReader(b)), max, "lz4")
	case codecZstd:
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxMemory(uint64(max)+1))
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %v", ErrDecompress, err)
		}
		defer d.Close()
		out, err := d.DecodeAll(b, nil)
		switch {
		case errors.Is(err, zstd.ErrDecoderSizeExceeded), err == nil && len(out) > max:
			return nil, fmt.Errorf("%w: decompresses past %d bytes", ErrBatchTooLarge, max)
		case err != nil:
			return nil, fmt.Errorf("%w: zstd: %v", ErrDecompress, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: unknown codec %d", ErrDecompress, c)
}

func readBounded(r io.Reader, max int, name string) ([]byte, error) {
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrDecompress, name, err)
	}
	if n > int64(max) {
		return nil, fmt.Errorf("%w: decompresses past %d bytes", ErrBatchTooLarge, max)
	}
	return buf.Bytes(), nil
}

// snappyBlock appends one raw snappy block's content to dst, checking its
// claimed length before decoding.
func snappyBlock(dst, b []byte, max int) ([]byte, error) {
	l, err := s2.DecodedLen(b)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", ErrDecompress, err)
	}
	if l > max-len(dst) {
		return nil, fmt.Errorf("%w: decompresses past %d bytes", ErrBatchTooLarge, max)
	}
	out, err := s2.Decode(nil, b)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", ErrDecompress, err)
	}
	return append(dst, out...), nil
}

// xerial decodes the blocks after the 16-byte xerial header: each a big
// endian length and a raw snappy block.
func xerial(b []byte, max int) ([]byte, error) {
	var out []byte
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("%w: snappy: truncated xerial block", ErrDecompress)
		}
		n := binary.BigEndian.Uint32(b)
		b = b[4:]
		if uint64(n) > uint64(len(b)) {
			return nil, fmt.Errorf("%w: snappy: xerial block of %d bytes with %d left", ErrDecompress, n, len(b))
		}
		var err error
		if out, err = snappyBlock(out, b[:n], max); err != nil {
			return nil, err
		}
		b = b[n:]
	}
	return out, nil
}
