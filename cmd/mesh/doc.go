// Command mesh is node delivery on a NATS JetStream bus: "mesh key" makes a
// signing key pair, "mesh compose" signs a node's composition and puts it on
// the bus, "mesh assigner" writes each node's wants as the seven rules give
// them, and "mesh put" holds one node's want of a module by hand until
// "mesh put --end".
package main
