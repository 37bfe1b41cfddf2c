// Command release-record keeps one record per release and sends the release
// events the facts make due as CDEvents: it looks at the Flux units, their
// sources and Canaries (a pass at start, every INTERVAL and on every POST
// /flux and POST /flagger), and takes Argo Rollouts' and Argo CD's
// notifications at POST /facts/<cluster> and POST /argocd/<cluster>.
package main
