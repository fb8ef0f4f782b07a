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
// # Checking
//
// Interceptor is a Connect interceptor that authenticates every call: it
// reads "Authorization: Bearer <token>", hashes it and looks the hash up
// (Unauthenticated when missing or unknown) and stores the Grant in the
// context. The handler, which knows the stream a call names, then asks
// Allow (PermissionDenied when the grant does not cover it). Either check
// happens before anything is changed.
package auth
