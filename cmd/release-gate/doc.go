// Command release-gate answers Flagger's webhooks for every gated Application
// from the live cluster, failing closed, and between questions reconciles every
// gated Application every 15 seconds.
package main
