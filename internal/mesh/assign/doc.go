// Package assign is the mesh assigner: which fingerprint of each module each
// node is to run, decided by seven rules over plain values (Decide), and the
// service that watches the bus, rebuilds those values and writes the wants
// the rules give under compare-and-swap (Assigner).
package assign
