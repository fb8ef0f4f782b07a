// Package tests holds the tests that cross packages: the star with the
// absorb in-process (takeover and crash tests), the settlement pipeline
// against the AWS emulator, end-to-end runs, and README.md's Walkthrough
// run command by command as written (readme_test.go). It has no non-test
// code but this file.
package tests
