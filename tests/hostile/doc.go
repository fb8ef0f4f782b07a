// Package hostile runs the attacks of a hostile client against a star's
// API as a user would send them: a gzip bomb and an oversized body without
// a token, a trickled body, a flood of random tokens, millions of empty
// records, connections that never authenticate (issue 18); and those of a
// tenant with a token against another (issue 31): sessions kept past a
// revoke, tokens that outlive their parent, another principal's producer
// id, trim and fence with an append token, invisible names. Each is
// refused with a specific code while the server's memory, connections and
// metastore reads stay bounded. The limits and the test holding each are
// listed in docs/reliability.md ("Security limits") and docs/security.md.
package hostile
