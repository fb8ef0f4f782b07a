//go:build !linux

package main

// deathSignal: no kernel support here; exitWithParent's poll does it.
func deathSignal() {}

// parentExe: not known here; underGoRun goes by the executable's path.
func parentExe() string { return "" }
