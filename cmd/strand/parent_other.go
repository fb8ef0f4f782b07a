//go:build !linux

package main

// deathSignal: no kernel support here; exitWithParent's poll does it.
func deathSignal() {}
