// Package agent is the node's half of the mesh: what it decides of a want
// (Decide, pure), and how a composition is laid down on disk so that a crash
// leaves the old version or the new one, never half of one (Layout).
package agent
