// Package owntraffic holds the Release Gate's own requests to a member's copy: the
// traffic it sends a new copy on each analysis iteration, the one anonymous
// request that proves a protected path is not open, and the warmup that
// crosses the edge once a revision serves.
//
// Every request it makes goes to an address the gate chose, never one a
// response or the environment chose: no redirect is followed and no proxy is
// read from the environment. Paths and hostnames come from a member's
// metadata, which anyone who can write a Canary can set, so each is checked
// before any request is made.
package owntraffic
