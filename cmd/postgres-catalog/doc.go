// Command postgres-catalog applies a PostgreSQL server's database catalog
// once and exits: 0 when the server and Vault hold the catalog, 1 on a bad
// setting, a refused catalog or a failed step.
package main
