// Package hostile runs the attacks of a hostile client against a star's
// API as a user would send them: a gzip bomb and an oversized body without
// a token, a trickled body, a flood of random tokens. Each is refused with a
// specific code while the server's memory, connections and metastore reads
// stay bounded. The limits and the test holding each are listed in
// docs/reliability.md ("Security limits (issue 18)").
package hostile
