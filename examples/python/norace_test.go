//go:build linux && !race

package pythonexample_test

// raceEnabled is true when the test binary has the race detector; the
// server under test is then built with it too.
const raceEnabled = false
