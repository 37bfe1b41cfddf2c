// Package fakegithub is a stand-in for the parts of GitHub's REST API the
// services depend on, for tests only: GitHub cannot run here. It follows the
// published API where the services rely on it: App JWTs are verified (RS256,
// iss = the App's id, exp at most ten minutes ahead), installation tokens are
// issued and checked, the contents API serves git's real blob ids and refuses
// a stale sha with 409, deployments and their statuses are listed newest first
// and paged, a status's description is held to 140 characters, and every call is recorded so a test can state what a
// pass cost.
//
// Every request it receives and every answer it gives is validated with
// kin-openapi against GitHub's own OpenAPI description of the operations it
// serves (third_party/github, cut from @octokit/openapi). A request the
// description refuses is answered as GitHub would (422, 400, or 404 for a
// path GitHub would not route) and fails the test that made it, as does a
// call to an operation the double does not serve; an answer the description
// does not allow is a bug in the double and fails the test too. A double from
// Start, which has no test to fail, keeps them in Violations.
package fakegithub
