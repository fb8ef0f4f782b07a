package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/strandlog/strand/shared/format"
)

// lineReader splits the append input into records: one line each, its
// "\n" (or "\r\n") removed, of at most format.MaxRecordBytes, the record
// limit; a longer line is an error that names it. A last line without a
// newline is a record too.
type lineReader struct {
	r   *bufio.Reader
	n   int // lines read
	max int // longest line (format.MaxRecordBytes unless set)
}

func newLineReader(in io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(in, 64<<10), max: format.MaxRecordBytes}
}

// next returns the next line (a fresh slice), or io.EOF after the last.
func (l *lineReader) next() ([]byte, error) {
	var line []byte
	for {
		frag, err := l.r.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > l.max+2 { // room for "\r\n"
			return nil, l.tooLong()
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read input: %w", err)
		}
		if len(line) == 0 {
			return nil, io.EOF
		}
		l.n++
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > l.max {
			l.n--
			return nil, l.tooLong()
		}
		return line, nil
	}
}

func (l *lineReader) tooLong() error {
	if l.max != format.MaxRecordBytes {
		return fmt.Errorf("line %d is longer than %d bytes: no record's JSON is that long", l.n+1, l.max)
	}
	return fmt.Errorf("line %d is longer than %d bytes, the record limit (1 MiB): split it", l.n+1, format.MaxRecordBytes)
}
