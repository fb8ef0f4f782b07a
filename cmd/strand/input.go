package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/rawjson"
)

// ErrInput: an append input that is not records. The CLI's errors carry no
// package prefix: they are the command's own words.
var ErrInput = errors.New("bad input")

// recordSource yields the records an append sends: next returns io.EOF
// after the last.
type recordSource interface {
	next() (client.Record, error)
}

// textSource: each line a record's body; every record gets the same
// headers and timestamp (--header, --timestamp).
type textSource struct {
	lines   *lineReader
	headers []client.Header
	ts      int64
}

func (s *textSource) next() (client.Record, error) {
	line, err := s.lines.next()
	if err != nil {
		return client.Record{}, err
	}
	return client.Record{Body: line, Headers: s.headers, TimestampMs: s.ts}, nil
}

// jsonSource: each line one record as raw JSON, the shape `strand read
// --format json` prints ({"timestampMs":..,"headers":[{"name":..,"value":..}],
// "body":..}; bodyBase64 for bytes that are not text; seqNum, if present,
// is ignored), so a read's output appends as it is; its command records
// (a fence, a trim: one header with an empty name) are skipped. --header
// adds headers to every record after its own; --timestamp is the
// timestamp of records without one.
type jsonSource struct {
	lines   *lineReader
	headers []client.Header
	ts      int64
}

func (s *jsonSource) next() (client.Record, error) {
	for {
		line, err := s.lines.next()
		if err != nil {
			return client.Record{}, err
		}
		if strings.TrimSpace(string(line)) == "" {
			continue // blank lines separate nothing
		}
		r, err := parseJSONRecord(line, s.lines.n, s.ts)
		if err != nil || isCommand(r) {
			if err != nil {
				return r, err
			}
			continue // a fence or trim a read printed: not data to append
		}
		r.Headers = append(r.Headers, s.headers...)
		return r, nil
	}
}

// maxJSONLine bounds a JSON-lines input line: a 1 MiB record as base64
// (4/3) or escaped text, with room to spare.
const maxJSONLine = 8 << 20

// parseJSONRecord parses line n of a JSON-lines input; ts stamps a record
// without a timestamp.
func parseJSONRecord(line []byte, n int, ts int64) (client.Record, error) {
	var m strandv1.SequencedRecord
	if err := rawjson.Unmarshal(line, &m); err != nil {
		return client.Record{}, fmt.Errorf("%w: line %d is not a JSON record (%v); want {\"body\":\"...\",\"headers\":[{\"name\":\"k\",\"value\":\"v\"}],\"timestampMs\":1700000000000}", ErrInput, n, err)
	}
	if m.TimestampMs < 0 {
		return client.Record{}, fmt.Errorf("%w: line %d: timestampMs %d is negative", ErrInput, n, m.TimestampMs)
	}
	r := client.Record{Body: m.Body, TimestampMs: m.TimestampMs}
	if r.TimestampMs == 0 {
		r.TimestampMs = ts
	}
	for _, h := range m.Headers {
		r.Headers = append(r.Headers, client.Header{Name: h.Name, Value: h.Value})
	}
	if len(r.Body) > format.MaxRecordBytes {
		return client.Record{}, fmt.Errorf("%w: line %d: a body of %d bytes is over the record limit (1 MiB)", ErrInput, n, len(r.Body))
	}
	return r, nil
}

// parseHeaders parses --header values: NAME=VALUE, the name not empty.
func parseHeaders(hs []string) ([]client.Header, error) {
	var out []client.Header
	for _, h := range hs {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%w: --header %q: want NAME=VALUE (e.g. --header content-type=text/plain)", ErrInput, h)
		}
		out = append(out, client.Header{Name: []byte(k), Value: []byte(v)})
	}
	return out, nil
}

// parseTimestamp parses a timestamp flag: milliseconds since the epoch
// or RFC 3339.
func parseTimestamp(flag, s string) (int64, error) {
	if v, err := strconv.ParseInt(s, 10, 64); err == nil && v >= 0 {
		return v, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil || t.UnixMilli() < 0 {
		return 0, fmt.Errorf("%w: %s %q: want milliseconds since the epoch or RFC 3339 (2024-01-02T15:04:05Z)", ErrInput, flag, s)
	}
	return t.UnixMilli(), nil
}

// newSource is the append input in format (text or json).
func newSource(in io.Reader, format string, headers []string, timestamp string) (recordSource, error) {
	hs, err := parseHeaders(headers)
	if err != nil {
		return nil, err
	}
	var ts int64
	if timestamp != "" {
		if ts, err = parseTimestamp("--timestamp", timestamp); err != nil {
			return nil, err
		}
	}
	switch format {
	case "text":
		return &textSource{lines: newLineReader(in), headers: hs, ts: ts}, nil
	case "json":
		lr := newLineReader(in)
		lr.max = maxJSONLine
		return &jsonSource{lines: lr, headers: hs, ts: ts}, nil
	}
	return nil, fmt.Errorf("%w: --format %q: want text (a record per line) or json (a JSON record per line)", ErrInput, format)
}
