// Command demo runs a whole release through the Release Gate and the real
// Flagger on an embedded cluster and prints the transcript; with --once it
// exits after the story, 0 only when every step happened as the story
// expects.
package main
