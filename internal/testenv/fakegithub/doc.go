// Package fakegithub is a stand-in for the parts of GitHub's REST API the
// services depend on, for tests only: GitHub cannot run here. It follows the
// published API where the services rely on it: App JWTs are verified (RS256,
// iss = the App's id, exp at most ten minutes ahead), installation tokens are
// issued and checked, the contents API serves git's real blob ids and refuses
// a stale sha with 409, deployments and their statuses are listed newest first
// and paged, a status's description is held to 140 characters, and every call is recorded so a test can state what a
// pass cost.
package fakegithub
