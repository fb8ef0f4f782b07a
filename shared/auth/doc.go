// Package auth issues and checks strand's bearer tokens.
//
// A token is "strand_" followed by 52 base32 characters (32 random bytes,
// lowercase, unpadded). Only its SHA-256 (hex) is stored, as a
// metastore.Token with the grant: a stream-name prefix ("" = every stream)
// and a set of operations. The secret is printed once, at issue, and never
// logged.
//
// # Operations
//
//	read    GetStream, ListStreams, CheckTail, Read, ReadSession
//	append  Append, AppendSession
//	admin   CreateStream, DeleteStream, and everything read and append allow
//
// admin implies read and append: an administrator of a prefix can do
// anything to the streams under it. A call is allowed when the token's
// prefix is a prefix of the stream's name and its operations include the
// call's. ListStreams lists only the names under the token's prefix.
//
// # Issuing and revoking
//
// strand dev issues one admin token; after that, an admin token mints
// others through the API (CreateToken): the new token's prefix must be
// within the minting token's prefix (Grant.Within: a token scoped to
// "team-a/" cannot mint one for "" or "team-b/") and its operations ones
// the minting token holds. The secret is returned once; the hash is the
// token's id for RevokeToken and ListTokens, which obey the same scoping.
//
// Revocation deletes the stored hash. The Checker that served the revoke
// forgets its cached grant at once (Forget); every other server's Checker
// keeps a cached grant for at most its TTL (10 s by default), so a revoked
// token stops working everywhere within 10 s.
//
// # Checking
//
// Middleware authenticates every HTTP request from its headers before
// anything reads its body: it reads "Authorization: Bearer <token>",
// hashes it and looks the hash up (Unauthenticated when missing or
// unknown, answered in the caller's protocol) and stores the Grant in the
// context; a request without a valid token costs its headers only.
// Interceptor does the same inside Connect (it uses the grant Middleware
// stored when there is one).
//
// The Checker caches grants and misses for TTL (10 s) in two LRUs of
// 10,000 entries each (a flood of unknown tokens cannot evict a valid
// grant), makes concurrent checks of one token share one metastore read,
// and limits metastore lookups of tokens not known valid per source
// address (50/s, burst 200) and in all (500/s, burst 2000): past either a
// call is answered ResourceExhausted without a read. A known-valid token
// whose grant expired is looked up again regardless. The handler, which knows the stream a call names, then asks
// Allow (PermissionDenied when the grant does not cover it). Either check
// happens before anything is changed.
package auth
