// Package periodic runs a service's pass when it starts, once every interval
// and whenever it is prompted, never two at once, and knows whether the pass
// has been succeeding lately (the liveness answer of /fresh).
package periodic
