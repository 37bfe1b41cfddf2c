// Package server is the HTTP surface every delivery service shares: health and
// readiness, request logging, timeouts, a body limit and a bounded drain.
package server
