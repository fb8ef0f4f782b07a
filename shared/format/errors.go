package format

import "errors"

// Decoding errors. Every decoder error matches exactly one of these with
// errors.Is, wrapped with what was being decoded.
var (
	ErrTruncated = errors.New("format: truncated")
	ErrMagic     = errors.New("format: bad magic")
	ErrVersion   = errors.New("format: unknown format version")
	ErrKind      = errors.New("format: unknown kind")
	ErrCRC       = errors.New("format: CRC mismatch")
	ErrBounds    = errors.New("format: footer or segment out of bounds")
	ErrMalformed = errors.New("format: malformed")
	// ErrTooLong: a segment (or settled object) would not fit its 32-bit
	// length or count fields. Refused, never wrapped.
	ErrTooLong = errors.New("format: segment too long for its 32-bit lengths")
)

// Batch validation errors.
var (
	ErrEmptyBatch    = errors.New("format: empty batch")
	ErrBatchTooLarge = errors.New("format: batch too large")
	ErrRecordInvalid = errors.New("format: invalid record")
)
