// Package rawjson is the API's raw JSON: protobuf JSON with bytes as
// readable text, the one record shape the CLI prints and that curl users
// read and write with `Strand-Format: raw` (S2's `S2-Format: raw`).
//
// It differs from the protobuf JSON mapping (protojson) in three ways, and
// only in these:
//
//   - a bytes field F is a JSON string holding its bytes as UTF-8 text when
//     they are valid UTF-8; bytes that are not are base64 (standard, with
//     padding) in a field named F + "Base64" instead (a body that is not
//     text is "bodyBase64"). On input either is accepted.
//   - 64-bit integers are JSON numbers, not strings (seq numbers and
//     millisecond timestamps stay far below 2^53, where JSON numbers are
//     exact in every language).
//   - every field without presence is always present, zero or not: seq 0
//     is "seqNum":0, an empty body is "body":"", no headers is
//     "headers":[]. Fields with presence (optional, oneof members,
//     messages) appear when set.
//
// Field names are protojson's (lowerCamelCase), enums are their names.
// Input is protojson input with the bytes rule above: a string in F is
// the text itself, not base64; unknown fields are ignored, as by the API's
// JSON.
//
// A record reads:
//
//	{"seqNum":0,"timestampMs":1700000000000,"headers":[{"name":"k","value":"v"}],"body":"first"}
package rawjson
