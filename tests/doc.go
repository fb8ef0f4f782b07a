// Package tests holds the tests that cross packages: the star with the
// absorb in-process (takeover and crash tests), the settlement pipeline
// against the AWS emulator, and end-to-end runs. It has no non-test code
// but this file.
package tests
