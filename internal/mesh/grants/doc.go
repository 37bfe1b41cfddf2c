// Package grants says what each part of the mesh may do on the bus, and
// composes the operator, account and user JWTs that hold it to that: every
// part its own credential with the least it needs, and a node's agent
// reading only its own wants and compositions.
package grants
