//go:build race

package main

// raceEnabled: the test binary (and every packbot process it starts) runs under the race
// detector, several times slower: timing assertions are relaxed.
const raceEnabled = true
