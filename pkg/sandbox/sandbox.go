// Package sandbox starts confined processes. (Placeholder: being written.)
package sandbox

// Runner starts confined processes for one session.
type Runner struct{}
