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
//	trim    Trim
//	fence   Fence (and reading fence records' bodies)
//	admin   CreateStream, DeleteStream, ReconfigureStream, the token
//	        calls, and everything the others allow
//
// admin implies the others: an administrator of a prefix can do anything
// to the streams under it. trim and fence are apart from append: either
// undoes other writers' work. A call is allowed when the token's
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
// A minted token records its parent (Token.Parent) and expires at the
// latest when its parent does; the Checker reads a token's ancestors (at
// most MaxDepth) and folds their expiry and revocation into its Grant, so
// revoking or expiring a token voids every token under it. The root of a
// token's tree is its tenant (Grant.Tenant), the key of per-tenant limits.
//
// Revocation marks the stored token revoked (Token.RevokedMs, a tombstone
// kept so that its use fails with ErrRevoked, not ErrUnauthenticated). The
// Checker that served the revoke forgets its cached grant, and its
// descendants', at once (Forget); every other server's Checker keeps a
// cached grant for at most its TTL (10 s by default), so a revoked token
// stops working everywhere within 10 s. A token may carry an expiry
// (Token.ExpiresMs): from then on it fails with ErrExpired, checked at
// every call, cached grant or not. The server ends a revoked or expired
// token's open sessions within a second of seeing it.
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
